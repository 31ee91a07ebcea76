# shaders.mk — the Vulkan backend in the build (included by the Makefile when
# VULKAN=1): its host sources, its tests and bench, and the compute shaders.
#
# Every entry of VK_SHADERS is name:source:defines (defines joined by ^). One
# GLSL source gives several SPIR-V variants (weight dtype, linear or conv).
# glslc writes each as a C initializer of uint32_t words ($(VK_GEN)/name.inc)
# vk_shader_list.h lists the names (one X(name) a line) and vk_shader_blobs.h
# includes each .inc as an array for vk_shaders.c.

GLSLC ?= glslc
ifeq ($(shell command -v $(GLSLC) 2>/dev/null),)
$(error VULKAN=1 needs glslc to compile the compute shaders (apt-get install glslc))
endif
ifneq ($(shell printf '\#include <vulkan/vulkan.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo ok),ok)
$(error VULKAN=1 needs the Vulkan headers (apt-get install libvulkan-dev))
endif

VK_SHADER_DIR := src/vulkan/shaders
VK_GEN        := $(BUILD)/spv
GLSLC_FLAGS   := -O --target-env=vulkan1.1 -I$(VK_SHADER_DIR)

# Cooperative matrices need a glslc that knows GL_KHR_cooperative_matrix
# (Debian 12's does not): probed here, reported by the backend.
VK_COOPMAT := $(shell printf '\#version 450\n\#extension GL_KHR_cooperative_matrix : require\nlayout(local_size_x = 32) in;\nvoid main() {}\n' | \
                $(GLSLC) -fshader-stage=compute --target-env=vulkan1.3 -o /dev/null - >/dev/null 2>&1 && echo 1)

VK_SHADERS := \
    gemm_reg_f32:gemm_reg:-DWTYPE=0      gemm_reg_bf16:gemm_reg:-DWTYPE=1      gemm_reg_f16:gemm_reg:-DWTYPE=2 \
    conv_reg_f32:gemm_reg:-DWTYPE=0^-DCONV=1 conv_reg_bf16:gemm_reg:-DWTYPE=1^-DCONV=1 conv_reg_f16:gemm_reg:-DWTYPE=2^-DCONV=1 \
    gemm_tiled_f32:gemm_tiled:-DWTYPE=0  gemm_tiled_bf16:gemm_tiled:-DWTYPE=1  gemm_tiled_f16:gemm_tiled:-DWTYPE=2 \
    conv_tiled_f32:gemm_tiled:-DWTYPE=0^-DCONV=1 conv_tiled_bf16:gemm_tiled:-DWTYPE=1^-DCONV=1 conv_tiled_f16:gemm_tiled:-DWTYPE=2^-DCONV=1 \
    gemm_reg_q8_0:gemm_reg:-DWTYPE=3     gemm_reg_q4_0:gemm_reg:-DWTYPE=4     gemm_reg_q4_k:gemm_reg:-DWTYPE=5 \
    gemm_reg_q5_k:gemm_reg:-DWTYPE=6     gemm_reg_q6_k:gemm_reg:-DWTYPE=7 \
    gemm_tiled_q8_0:gemm_tiled:-DWTYPE=3 gemm_tiled_q4_0:gemm_tiled:-DWTYPE=4 gemm_tiled_q4_k:gemm_tiled:-DWTYPE=5 \
    gemm_tiled_q5_k:gemm_tiled:-DWTYPE=6 gemm_tiled_q6_k:gemm_tiled:-DWTYPE=7 \
    gemm_reg_q4_1:gemm_reg:-DWTYPE=8     gemm_reg_q5_0:gemm_reg:-DWTYPE=9     gemm_reg_q5_1:gemm_reg:-DWTYPE=10 \
    gemm_reg_q2_k:gemm_reg:-DWTYPE=11    gemm_reg_q3_k:gemm_reg:-DWTYPE=12    gemm_reg_iq4_nl:gemm_reg:-DWTYPE=13 \
    gemm_reg_iq4_xs:gemm_reg:-DWTYPE=14 \
    gemm_tiled_q4_1:gemm_tiled:-DWTYPE=8 gemm_tiled_q5_0:gemm_tiled:-DWTYPE=9 gemm_tiled_q5_1:gemm_tiled:-DWTYPE=10 \
    gemm_tiled_q2_k:gemm_tiled:-DWTYPE=11 gemm_tiled_q3_k:gemm_tiled:-DWTYPE=12 gemm_tiled_iq4_nl:gemm_tiled:-DWTYPE=13 \
    gemm_tiled_iq4_xs:gemm_tiled:-DWTYPE=14 \
    gemm_reg_f8_e4m3:gemm_reg:-DWTYPE=15 gemm_reg_f8_e5m2:gemm_reg:-DWTYPE=16 \
    gemm_tiled_f8_e4m3:gemm_tiled:-DWTYPE=15 gemm_tiled_f8_e5m2:gemm_tiled:-DWTYPE=16 \
    attention:attention: attention_rows_d32:attention_rows:-DDMAX=32^-DRQ=2 attention_rows_d64:attention_rows:-DDMAX=64^-DRQ=2 \
    attention_rows_d128:attention_rows:-DDMAX=128^-DRQ=1 \
    rmsnorm:rmsnorm: layernorm_modulate:layernorm_modulate: qk_norm_rope:qk_norm_rope: softmax:softmax: \
    silu:silu: swiglu:swiglu: gated_add:gated_add: kron_gather:kron_gather: \
    groupnorm_partial:groupnorm_partial: groupnorm_finish:groupnorm_finish: groupnorm_apply:groupnorm_apply: \
    convert:convert:

VK_NAMES :=
VK_SPV   :=
define vk_shader_rule
$(VK_GEN)/$(1).inc: $(VK_SHADER_DIR)/$(2).comp
	@mkdir -p $$(dir $$@)
	@$$(if $$(filter 0,$$(V)),echo "  GLSLC   $$@")
	$$(Q)$$(GLSLC) $$(GLSLC_FLAGS) $(3) -MD -MF $$@.d -MT $$@ -mfmt=c $$< -o $$@
VK_NAMES += $(1)
VK_SPV   += $(VK_GEN)/$(1).inc
endef
vk_field = $(word $(1),$(subst :, ,$(subst ::,: :,$(2))))
$(foreach s,$(VK_SHADERS),$(eval $(call vk_shader_rule,$(call vk_field,1,$(s)),$(call vk_field,2,$(s)),$(subst ^, ,$(call vk_field,3,$(s))))))
VK_SPV_DEPS := $(VK_SPV:=.d)

$(VK_GEN)/vk_shader_list.h: $(VK_SHADER_DIR)/shaders.mk
	@mkdir -p $(dir $@)
	$(Q)printf 'X(%s)\n' $(VK_NAMES) > $@.tmp && mv $@.tmp $@
$(VK_GEN)/vk_shader_blobs.h: $(VK_SHADER_DIR)/shaders.mk
	@mkdir -p $(dir $@)
	$(Q)for n in $(VK_NAMES); do printf 'static const uint32_t spv_%s[] =\n#include "%s.inc"\n;\n' $$n $$n; done > $@.tmp && mv $@.tmp $@

VK_SRC   := $(wildcard src/vulkan/*.c)
VK_OBJ   := $(VK_SRC:%.c=$(OBJ)/%.o)
# The ops seam's Vulkan backend replaces its "built without Vulkan" stand-in.
LIB_SRC  := $(filter-out src/ops/ops_novk.c,$(LIB_SRC)) $(VK_SRC) src/ops/ops_vulkan.c
TEST_SRC += $(wildcard tests/vulkan/*.c)
BENCH_SRC += bench/bench_vulkan.c
$(VK_OBJ) $(patsubst %.c,$(OBJ)/%.o,$(wildcard tests/vulkan/*.c) $(wildcard bench/*.c)): \
    CPPFLAGS += -DFLUX_VULKAN -I$(VK_GEN) $(if $(VK_COOPMAT),-DFX_VK_GLSLC_COOPMAT=1)
$(VK_OBJ) $(patsubst %.c,$(OBJ)/%.o,$(wildcard tests/vulkan/*.c)): $(VK_GEN)/vk_shader_list.h
$(OBJ)/src/vulkan/vk_shaders.o: $(VK_SPV) $(VK_GEN)/vk_shader_blobs.h
LDLIBS   += -ldl

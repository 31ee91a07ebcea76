/*
 * vk_shaders.c — the SPIR-V of every compute shader, compiled by glslc at
 * build time (src/vulkan/shaders/shaders.mk) and embedded as uint32_t words:
 * vk_shader_blobs.h (generated) holds `static const uint32_t spv_<name>[]`
 * for each name of vk_shader_list.h.
 */
#include "vk_internal.h"

#include "vk_shader_blobs.h"

static const struct {
    const char *name;
    const uint32_t *code;
    size_t bytes;
} shaders[VK_SH_COUNT] = {
#define X(name) {#name, spv_##name, sizeof spv_##name},
#include "vk_shader_list.h"
#undef X
};

const uint32_t *vk_shader_code(vk_shader_id id, size_t *bytes) {
    *bytes = shaders[id].bytes;
    return shaders[id].code;
}

const char *vk_shader_name(vk_shader_id id) { return shaders[id].name; }

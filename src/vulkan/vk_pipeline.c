/*
 * vk_pipeline.c — compute pipelines, created on first use and cached in the
 * context. A pipeline is one embedded shader with its specialization
 * constants 0..n-1 (workgroup and tile sizes); its layout is n storage
 * buffers at bindings 0..n-1 and one push-constant block.
 */
#include "vk_internal.h"

#include <string.h>

static void pipeline_destroy(fx_vk *vk, vk_pipeline *p) {
    if (p->pipe) vk->f.vkDestroyPipeline(vk->dev, p->pipe, NULL);
    if (p->layout) vk->f.vkDestroyPipelineLayout(vk->dev, p->layout, NULL);
    if (p->dsl) vk->f.vkDestroyDescriptorSetLayout(vk->dev, p->dsl, NULL);
    memset(p, 0, sizeof *p);
}

void vk_pipelines_destroy(fx_vk *vk) {
    for (int i = 0; i < vk->npipes; i++) pipeline_destroy(vk, &vk->pipes[i]);
    vk->npipes = 0;
}

static flux_status create(fx_vk *vk, vk_pipeline *p, fx_err *err) {
    const char *name = vk_shader_name(p->shader);
    VkDescriptorSetLayoutBinding bind[VK_MAX_BINDINGS];
    for (int i = 0; i < p->nbind; i++)
        bind[i] = (VkDescriptorSetLayoutBinding){
            .binding = (uint32_t)i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = (uint32_t)p->nbind,
        .pBindings = bind,
    };
    VkResult r = vk->f.vkCreateDescriptorSetLayout(vk->dev, &dci, NULL, &p->dsl);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes};
    VkPipelineLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->dsl,
        .pushConstantRangeCount = p->push_bytes ? 1 : 0,
        .pPushConstantRanges = &range,
    };
    r = vk->f.vkCreatePipelineLayout(vk->dev, &lci, NULL, &p->layout);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkCreatePipelineLayout");

    size_t bytes;
    const uint32_t *code = vk_shader_code(p->shader, &bytes);
    VkShaderModuleCreateInfo sci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = bytes,
        .pCode = code,
    };
    VkShaderModule mod;
    r = vk->f.vkCreateShaderModule(vk->dev, &sci, NULL, &mod);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkCreateShaderModule");
    VkSpecializationMapEntry map[VK_MAX_SPEC];
    for (int i = 0; i < p->nspec; i++)
        map[i] = (VkSpecializationMapEntry){(uint32_t)i, (uint32_t)(i * sizeof(uint32_t)), sizeof(uint32_t)};
    VkSpecializationInfo spec = {
        .mapEntryCount = (uint32_t)p->nspec,
        .pMapEntries = map,
        .dataSize = (size_t)p->nspec * sizeof(uint32_t),
        .pData = p->spec,
    };
    VkComputePipelineCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = mod,
            .pName = "main",
            .pSpecializationInfo = p->nspec ? &spec : NULL,
        },
        .layout = p->layout,
    };
    r = vk->f.vkCreateComputePipelines(vk->dev, VK_NULL_HANDLE, 1, &pci, NULL, &p->pipe);
    vk->f.vkDestroyShaderModule(vk->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        p->pipe = VK_NULL_HANDLE;
        flux_status st = vk_fail(vk, err, r, "vkCreateComputePipelines");
        fx_prefix(err, "shader %s", name);
        return st;
    }
    return FLUX_OK;
}

flux_status vk_pipeline_get(fx_vk *vk, vk_shader_id sh, int nbind, uint32_t push_bytes, const uint32_t *spec,
                            int nspec, const vk_pipeline **out, fx_err *err) {
    for (int i = 0; i < vk->npipes; i++) {
        const vk_pipeline *p = &vk->pipes[i];
        if (p->shader == sh && p->nspec == nspec && !memcmp(p->spec, spec, (size_t)nspec * sizeof *spec)) {
            *out = p;
            return FLUX_OK;
        }
    }
    if (vk->npipes == VK_MAX_PIPELINES)
        return fx_fail(err, FLUX_ERR_INTERNAL, "Vulkan: more than %d pipelines", VK_MAX_PIPELINES);
    if (nbind > VK_MAX_BINDINGS || nspec > VK_MAX_SPEC || push_bytes > VK_PUSH_MAX)
        return fx_fail(err, FLUX_ERR_INTERNAL, "Vulkan: shader %s layout out of range", vk_shader_name(sh));
    vk_pipeline *p = &vk->pipes[vk->npipes];
    memset(p, 0, sizeof *p);
    p->shader = sh;
    p->nspec = nspec;
    if (nspec) memcpy(p->spec, spec, (size_t)nspec * sizeof *spec);
    p->nbind = nbind;
    p->push_bytes = push_bytes;
    flux_status st = create(vk, p, err);
    if (st != FLUX_OK) {
        pipeline_destroy(vk, p);
        return st;
    }
    vk->npipes++;
    *out = p;
    return FLUX_OK;
}

/*
 * vk_device.c — physical devices: what each offers (fx_vk_device_info),
 * the list, the choice (discrete > integrated > virtual > other, a CPU
 * device such as lavapipe only when asked for), and the context: logical
 * device, one compute queue, memory, recorder.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Workgroup sizes the shaders use go up to this many invocations. */
#define MIN_INVOCATIONS 256

void fx_vk_opts_init(fx_vk_opts *o) {
    memset(o, 0, sizeof *o);
    o->device = FX_VK_DEVICE_AUTO;
}

const char *fx_vk_device_type_name(fx_vk_device_type t) {
    switch (t) {
    case FX_VK_DEV_INTEGRATED: return "integrated GPU";
    case FX_VK_DEV_DISCRETE: return "discrete GPU";
    case FX_VK_DEV_VIRTUAL: return "virtual GPU";
    case FX_VK_DEV_CPU: return "CPU";
    default: return "other";
    }
}

static int device_has_ext(const vk_instance *in, VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (in->f.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || !n) return 0;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    int found = 0;
    if (p && in->f.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].extensionName, name);
    free(p);
    return found;
}

/* First queue family with compute, or -1. */
static int compute_family(const vk_instance *in, VkPhysicalDevice pd) {
    uint32_t n = 0;
    in->f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    int fam = -1;
    if (q) {
        in->f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
        for (uint32_t i = 0; i < n && fam < 0; i++)
            if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT && q[i].queueCount > 0) fam = (int)i;
    }
    free(q);
    return fam;
}

void vk_device_query(const vk_instance *in, VkPhysicalDevice pd, int index, fx_vk_device_info *info) {
    memset(info, 0, sizeof *info);
    info->index = index;
    VkPhysicalDeviceProperties base;
    in->f.vkGetPhysicalDeviceProperties(pd, &base);
    info->type = (fx_vk_device_type)base.deviceType;
    snprintf(info->name, sizeof info->name, "%s", base.deviceName);
    info->api_version = base.apiVersion;

    const int v12 = base.apiVersion >= VK_API_VERSION_1_2;
    const int driver_props = v12 || device_has_ext(in, pd, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
        .pNext = driver_props ? &drv : NULL};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                             .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    if (base.apiVersion >= VK_API_VERSION_1_1) in->f.vkGetPhysicalDeviceProperties2(pd, &p2);
    if (driver_props && drv.driverName[0])
        snprintf(info->driver, sizeof info->driver, "%.120s, %.120s", drv.driverName, drv.driverInfo);
    else
        snprintf(info->driver, sizeof info->driver, "driver version 0x%x", base.driverVersion);

    const VkPhysicalDeviceLimits *lim = &base.limits;
    info->max_binding = lim->maxStorageBufferRange;
    info->max_allocation = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : ((uint64_t)1 << 30);
    info->max_buffer = info->max_allocation;
    info->binding_align = (uint32_t)lim->minStorageBufferOffsetAlignment;
    info->subgroup_size = sg.subgroupSize;
    info->shared_memory = lim->maxComputeSharedMemorySize;
    info->max_invocations = lim->maxComputeWorkGroupInvocations;

    VkPhysicalDeviceMemoryProperties mem;
    in->f.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    int best_heap = -1;
    for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT &&
            (best_heap < 0 || mem.memoryHeaps[h].size > mem.memoryHeaps[best_heap].size))
            best_heap = (int)h;
    if (best_heap >= 0) {
        info->device_memory = mem.memoryHeaps[best_heap].size;
        const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                           VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        for (uint32_t t = 0; t < mem.memoryTypeCount; t++)
            if ((mem.memoryTypes[t].propertyFlags & want) == want &&
                (int)mem.memoryTypes[t].heapIndex == best_heap)
                info->unified_memory = 1;
    }

    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .pNext = (v12 || device_has_ext(in, pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) ? &f16 : NULL};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
    if (base.apiVersion >= VK_API_VERSION_1_1) in->f.vkGetPhysicalDeviceFeatures2(pd, &f2);
    info->float16 = f16.shaderFloat16 && s16.storageBuffer16BitAccess;
    info->coopmat = device_has_ext(in, pd, "VK_KHR_cooperative_matrix");

    /* What the shaders need. */
    const VkSubgroupFeatureFlags ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    info->usable = 0;
    if (base.apiVersion < VK_API_VERSION_1_1)
        snprintf(info->why_not, sizeof info->why_not, "supports only Vulkan %u.%u (1.1 needed)",
                 VK_API_VERSION_MAJOR(base.apiVersion), VK_API_VERSION_MINOR(base.apiVersion));
    else if (compute_family(in, pd) < 0)
        snprintf(info->why_not, sizeof info->why_not, "has no compute queue");
    else if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || (sg.supportedOperations & ops) != ops)
        snprintf(info->why_not, sizeof info->why_not, "lacks subgroup arithmetic in compute shaders");
    else if (info->max_invocations < MIN_INVOCATIONS)
        snprintf(info->why_not, sizeof info->why_not, "allows only %u invocations per workgroup (%d needed)",
                 info->max_invocations, MIN_INVOCATIONS);
    else if (info->subgroup_size < 4 || info->subgroup_size > 128)
        snprintf(info->why_not, sizeof info->why_not, "has subgroups of %u invocations", info->subgroup_size);
    else
        info->usable = 1;
}

/* All physical devices of an instance (malloc'd). */
static flux_status enumerate(const vk_instance *in, VkPhysicalDevice **out, uint32_t *n, fx_err *err) {
    *out = NULL;
    *n = 0;
    VkResult r = in->f.vkEnumeratePhysicalDevices(in->inst, n, NULL);
    if (r != VK_SUCCESS)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: vkEnumeratePhysicalDevices: %s", vk_result_name(r));
    if (*n == 0) return FLUX_OK;
    *out = calloc(*n, sizeof **out);
    if (!*out) return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of memory listing devices");
    r = in->f.vkEnumeratePhysicalDevices(in->inst, n, *out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(*out);
        *out = NULL;
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: vkEnumeratePhysicalDevices: %s", vk_result_name(r));
    }
    return FLUX_OK;
}

flux_status fx_vk_list_devices(const fx_vk_opts *o, fx_vk_device_info *out, int max, int *count,
                               fx_err *err) {
    fx_vk_opts def;
    if (!o) fx_vk_opts_init(&def), o = &def;
    *count = 0;
    vk_instance in;
    flux_status st = vk_instance_create(&in, o, NULL, err);
    VkPhysicalDevice *pds = NULL;
    uint32_t n = 0;
    if (st == FLUX_OK) st = enumerate(&in, &pds, &n, err);
    if (st == FLUX_OK) {
        for (uint32_t i = 0; i < n && (int)i < max; i++) vk_device_query(&in, pds[i], (int)i, &out[i]);
        *count = (int)n;
    }
    free(pds);
    vk_instance_destroy(&in);
    return st;
}

static int type_rank(fx_vk_device_type t) {
    switch (t) {
    case FX_VK_DEV_DISCRETE: return 4;
    case FX_VK_DEV_INTEGRATED: return 3;
    case FX_VK_DEV_VIRTUAL: return 2;
    case FX_VK_DEV_CPU: return 0;
    default: return 1;
    }
}

/* Index of the device to open, per o->device. */
static flux_status choose(const fx_vk_device_info *infos, int n, int want, int *chosen, fx_err *err) {
    if (n == 0)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: no Vulkan device found (drivers are installed but see no device)");
    if (want >= 0) {
        if (want >= n)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan: device %d does not exist (%d device%s: 0..%d)",
                           want, n, n == 1 ? "" : "s", n - 1);
        if (!infos[want].usable)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: device %d (%s) %s", want, infos[want].name,
                           infos[want].why_not);
        *chosen = want;
        return FLUX_OK;
    }
    int best = -1, cpu = -1;
    for (int i = 0; i < n; i++) {
        if (!infos[i].usable) continue;
        if (infos[i].type == FX_VK_DEV_CPU) {
            if (cpu < 0) cpu = i;
            if (want == FX_VK_DEVICE_AUTO) continue;
        }
        if (best < 0 || type_rank(infos[i].type) > type_rank(infos[best].type) ||
            (type_rank(infos[i].type) == type_rank(infos[best].type) &&
             infos[i].device_memory > infos[best].device_memory))
            best = i;
    }
    if (best >= 0) {
        *chosen = best;
        return FLUX_OK;
    }
    if (cpu >= 0)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: no GPU found, only the CPU device %d (%s); choose it explicitly "
                       "(--device %d) to use it", cpu, infos[cpu].name, cpu);
    return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: no usable device: device 0 (%s) %s", infos[0].name,
                   infos[0].why_not);
}

static flux_status create_device(fx_vk *vk, fx_err *err) {
    vk_fns *f = &vk->f;
    vk->queue_family = (uint32_t)compute_family(&vk->in, vk->phys);
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = vk->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f->vkGetPhysicalDeviceFeatures2(vk->phys, &have);
    VkPhysicalDeviceFeatures feat = {0};
    /* Out-of-bounds accesses become defined under validation (test runs). */
    if (vk->opts.validation) feat.robustBufferAccess = have.features.robustBufferAccess;
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .pEnabledFeatures = &feat,
    };
    VkResult r = f->vkCreateDevice(vk->phys, &dci, NULL, &vk->dev);
    if (r != VK_SUCCESS) {
        vk->dev = VK_NULL_HANDLE;
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: vkCreateDevice (%s): %s", vk->info.name,
                       vk_result_name(r));
    }
#define LOAD_DEVICE(name)                                                                          \
    f->name = (PFN_##name)f->vkGetDeviceProcAddr(vk->dev, #name);                                  \
    if (!f->name) return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: device lacks " #name);
    VK_DEVICE_FNS(LOAD_DEVICE)
#undef LOAD_DEVICE
    f->vkGetDeviceQueue(vk->dev, vk->queue_family, 0, &vk->queue);
    return FLUX_OK;
}

flux_status fx_vk_open(const fx_vk_opts *o, fx_vk **out, fx_err *err) {
    *out = NULL;
    fx_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of memory");
    if (o) vk->opts = *o;
    else fx_vk_opts_init(&vk->opts);
    double t = vk->opts.timeout_s > 0 ? vk->opts.timeout_s : 60.0;
    vk->timeout_ns = (uint64_t)(t * 1e9);

    flux_status st = vk_instance_create(&vk->in, &vk->opts, vk, err);
    VkPhysicalDevice *pds = NULL;
    uint32_t n = 0;
    fx_vk_device_info *infos = NULL;
    int chosen = -1;
    if (st == FLUX_OK) st = enumerate(&vk->in, &pds, &n, err);
    if (st == FLUX_OK && n) {
        infos = calloc(n, sizeof *infos);
        if (!infos) st = fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of memory");
        for (uint32_t i = 0; st == FLUX_OK && i < n; i++) vk_device_query(&vk->in, pds[i], (int)i, &infos[i]);
    }
    if (st == FLUX_OK) st = choose(infos, (int)n, vk->opts.device, &chosen, err);
    if (st == FLUX_OK) {
        vk->phys = pds[chosen];
        vk->info = infos[chosen];
        vk->f = vk->in.f;
        st = create_device(vk, err);
    }
    free(pds);
    free(infos);
    if (st == FLUX_OK) {
        vk->max_binding = vk->info.max_binding;
        if (vk->opts.max_binding_bytes && vk->opts.max_binding_bytes < vk->max_binding)
            vk->max_binding = vk->opts.max_binding_bytes;
        /* weights may take 85% of the device's memory: activations need the rest */
        vk->weight_budget = vk->opts.weight_budget       ? vk->opts.weight_budget
                            : vk->info.device_memory ? vk->info.device_memory / 100 * 85
                                                     : UINT64_MAX;
        st = vk_memory_init(vk, err);
    }
    if (st == FLUX_OK) st = vk_recorder_init(vk, err);
    if (st != FLUX_OK) {
        fx_vk_close(vk);
        return st;
    }
    if (vk->info.type == FX_VK_DEV_CPU)
        fx_log(vk->opts.log, 1, "Vulkan: %s is a CPU device (for testing; slow)", vk->info.name);
    char line[512];
    fx_vk_describe(vk, line, sizeof line);
    fx_log(vk->opts.log, 1, "Vulkan device: %s", line);
    *out = vk;
    return FLUX_OK;
}

void fx_vk_close(fx_vk *vk) {
    if (!vk) return;
    if (vk->dev) {
        if (!vk->lost) {
            vk_submit_wait(vk, NULL);
            vk->f.vkDeviceWaitIdle(vk->dev);
        }
        vk_recorder_destroy(vk);
        vk_pipelines_destroy(vk);
        vk_weights_destroy(vk);
        vk_memory_destroy(vk);
        vk->f.vkDestroyDevice(vk->dev, NULL);
    }
    vk_instance_destroy(&vk->in);
    free(vk);
}

const fx_vk_device_info *fx_vk_device(const fx_vk *vk) { return &vk->info; }

/* Cooperative-matrix shaders need a glslc that knows GL_KHR_cooperative_matrix
 * (probed by shaders.mk); until one builds them the device's support is
 * only reported. */
#ifdef FX_VK_GLSLC_COOPMAT
#define COOPMAT_NOTE ", coopmat (no coopmat shaders yet)"
#else
#define COOPMAT_NOTE ", coopmat (this build's glslc cannot compile coopmat shaders)"
#endif

size_t fx_vk_describe(const fx_vk *vk, char *buf, size_t size) {
    const fx_vk_device_info *d = &vk->info;
    int n = snprintf(buf, size,
                     "%s (%s), driver %s, Vulkan %u.%u.%u, %.1f GiB, subgroup %u, shared %u KiB, "
                     "binding %llu MiB%s%s%s",
                     d->name, fx_vk_device_type_name(d->type), d->driver, VK_API_VERSION_MAJOR(d->api_version),
                     VK_API_VERSION_MINOR(d->api_version), VK_API_VERSION_PATCH(d->api_version),
                     (double)d->device_memory / (1 << 30), d->subgroup_size, d->shared_memory >> 10,
                     (unsigned long long)(vk->max_binding >> 20), d->unified_memory ? ", unified memory" : "",
                     d->float16 ? ", f16" : "", d->coopmat ? COOPMAT_NOTE : "");
    return n < 0 ? 0 : (size_t)n;
}

int fx_vk_validation_errors(const fx_vk *vk, const char **first) {
    if (first) *first = vk->validation_errors ? vk->validation_first : "";
    return vk->validation_errors;
}

void fx_vk_inject_device_lost(fx_vk *vk) { vk->inject_lost = 1; }

uint64_t fx_vk_dispatch_count(const fx_vk *vk) { return vk->dispatch_total; }

/*
 * vk_status.c — the backend's error state, below everything else in
 * src/vulkan: VkResult names, the error for a failed call, and the lost
 * flag (a lost device or a wait that timed out leaves the context usable
 * only to report that error).
 */
#include "vk_internal.h"

#include <stdio.h>

const char *vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    default: return "VkResult error";
    }
}

flux_status vk_check_alive(const fx_vk *vk, fx_err *err) {
    if (vk->lost) return fx_fail(err, FLUX_ERR_INTERNAL, "%s", vk->lost_msg);
    return FLUX_OK;
}

flux_status vk_fail(fx_vk *vk, fx_err *err, VkResult r, const char *what) {
    if (r == VK_ERROR_DEVICE_LOST || r == VK_TIMEOUT) {
        if (!vk->lost) {
            vk->lost = 1;
            if (r == VK_TIMEOUT)
                snprintf(vk->lost_msg, sizeof vk->lost_msg,
                         "Vulkan: %s: the device did not finish within %.0f s (%s); the context is unusable",
                         what, (double)vk->timeout_ns * 1e-9, vk->info.name);
            else
                snprintf(vk->lost_msg, sizeof vk->lost_msg,
                         "Vulkan: %s: device lost (%s); the context is unusable", what, vk->info.name);
        }
        return fx_fail(err, FLUX_ERR_INTERNAL, "%s", vk->lost_msg);
    }
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: %s: %s", what, vk_result_name(r));
    return fx_fail(err, FLUX_ERR_INTERNAL, "Vulkan: %s: %s", what, vk_result_name(r));
}

/*
 * ops_novk.c — stands in for ops_vulkan.c in a build without VULKAN=1:
 * the Vulkan backend is reported as not built, never silently replaced.
 */
#include "ops_internal.h"

#define NOT_BUILT "this flux was built without Vulkan support (rebuild with make VULKAN=1)"

flux_status fx_ops_vulkan_open(const fx_ops_opts *o, int any_type, fx_ops *ops, fx_err *err) {
    (void)o, (void)any_type, (void)ops;
    return fx_fail(err, FLUX_ERR_UNSUPPORTED, NOT_BUILT);
}

flux_status fx_ops_vulkan_list(fx_device_desc *out, int max, int *count, fx_err *err) {
    (void)out, (void)max;
    *count = 0;
    return fx_fail(err, FLUX_ERR_UNSUPPORTED, NOT_BUILT);
}

/*
 * ops_novk.c — stands in for ops_vulkan.c in a build without VULKAN=1: the
 * Vulkan backend stays in the list, so --backend vulkan and --list-devices
 * report it as not built instead of an unknown name; it never opens.
 */
#include "ops_internal.h"

#define NOT_BUILT "this flux was built without Vulkan support (rebuild with make VULKAN=1)"

static flux_status open_novk(const fx_ops_opts *o, const fx_kctx *kc, int unasked, void **ctx, fx_err *err) {
    (void)o, (void)kc, (void)unasked, (void)ctx;
    return fx_fail(err, FLUX_ERR_UNSUPPORTED, NOT_BUILT);
}

static flux_status list_novk(fx_device_desc *out, int max, int *count, fx_err *err) {
    (void)out, (void)max;
    *count = 0;
    return fx_fail(err, FLUX_ERR_UNSUPPORTED, NOT_BUILT);
}

const fx_backend fx_backend_vulkan = {.name = "vulkan", .title = "Vulkan", .open = open_novk, .list_devices = list_novk};

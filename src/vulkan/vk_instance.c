/*
 * vk_instance.c — the loader and the instance: dlopen the Vulkan loader,
 * fetch the function pointers into the context's table, create an instance
 * (Vulkan 1.1+), optionally with the Khronos validation layer and a
 * debug-utils messenger that counts error messages into the context.
 */
#include "vk_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

/* Messages from the validation layer (or the loader). Errors are counted
 * and the first is kept; everything goes to the -v log. */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
    fx_vk *vk = user;
    const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        if (vk) {
            if (vk->validation_errors++ == 0)
                snprintf(vk->validation_first, sizeof vk->validation_first, "%s", msg);
        }
        if (vk && vk->opts.validation) fprintf(stderr, "flux: Vulkan error message: %s\n", msg);
        else fx_log(vk ? vk->opts.log : NULL, 1, "Vulkan error message: %s", msg); /* the call's error says it */
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        fx_log(vk ? vk->opts.log : NULL, 1, "Vulkan validation warning: %s", msg);
    }
    (void)types;
    return VK_FALSE;
}

static int has_layer(const vk_fns *f, const char *name) {
    uint32_t n = 0;
    if (f->vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *p = calloc(n, sizeof *p);
    int found = 0;
    if (p && f->vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].layerName, name);
    free(p);
    return found;
}

static int has_instance_ext(const vk_fns *f, const char *layer, const char *name) {
    uint32_t n = 0;
    if (f->vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    int found = 0;
    if (p && f->vkEnumerateInstanceExtensionProperties(layer, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].extensionName, name);
    free(p);
    return found;
}

static flux_status open_loader(vk_instance *in, const char *path, fx_err *err) {
    in->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!in->lib)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: cannot load the Vulkan loader %s (%s); install libvulkan1 and a "
                       "driver (e.g. mesa-vulkan-drivers)", path, dlerror());
    in->f.vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(in->lib, "vkGetInstanceProcAddr");
    if (!in->f.vkGetInstanceProcAddr)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: %s has no vkGetInstanceProcAddr", path);
#define LOAD_GLOBAL(name)                                                                          \
    in->f.name = (PFN_##name)in->f.vkGetInstanceProcAddr(NULL, #name);                             \
    if (!in->f.name) return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: loader lacks " #name);
    VK_GLOBAL_FNS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
    return FLUX_OK;
}

flux_status vk_instance_create(vk_instance *in, const fx_vk_opts *o, fx_vk *vk_for_messages,
                               fx_err *err) {
    memset(in, 0, sizeof *in);
    TRY(open_loader(in, o->loader ? o->loader : "libvulkan.so.1", err));
    vk_fns *f = &in->f;

    uint32_t api = VK_API_VERSION_1_1;
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)f->vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    uint32_t loader_api = VK_API_VERSION_1_0;
    if (enum_version) enum_version(&loader_api);
    if (loader_api < VK_API_VERSION_1_1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: the loader supports Vulkan %u.%u; flux needs 1.1 or newer",
                       VK_API_VERSION_MAJOR(loader_api), VK_API_VERSION_MINOR(loader_api));
    if (loader_api >= VK_API_VERSION_1_2) api = VK_API_VERSION_1_2;

    const char *layers[1];
    uint32_t nlayers = 0;
    if (o->validation) {
        if (!has_layer(f, VALIDATION_LAYER))
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "Vulkan: validation requested but %s is not installed "
                           "(apt-get install vulkan-validationlayers)", VALIDATION_LAYER);
        layers[nlayers++] = VALIDATION_LAYER;
    }
    /* Debug utils: from the loader, or from the validation layer (also one
     * enabled through VK_INSTANCE_LAYERS). */
    int debug_utils = has_instance_ext(f, NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                      (o->validation && has_instance_ext(f, VALIDATION_LAYER,
                                                         VK_EXT_DEBUG_UTILS_EXTENSION_NAME));
    const char *exts[1];
    uint32_t nexts = 0;
    if (debug_utils) exts[nexts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;

    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message,
        .pUserData = vk_for_messages,
    };
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "flux",
        .pEngineName = "flux.c",
        .apiVersion = api,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug_utils ? &mci : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = nlayers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = nexts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = f->vkCreateInstance(&ci, NULL, &in->inst);
    if (r != VK_SUCCESS) {
        in->inst = VK_NULL_HANDLE;
        if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "Vulkan: no Vulkan driver found (vkCreateInstance: %s); install one "
                           "(mesa-vulkan-drivers) or check VK_DRIVER_FILES", vk_result_name(r));
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: vkCreateInstance failed: %s",
                       vk_result_name(r));
    }
#define LOAD_INSTANCE(name)                                                                        \
    f->name = (PFN_##name)f->vkGetInstanceProcAddr(in->inst, #name);                               \
    if (!f->name) return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: instance lacks " #name);
    VK_INSTANCE_FNS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
    if (debug_utils) {
        f->vkCreateDebugUtilsMessengerEXT = (PFN_vkCreateDebugUtilsMessengerEXT)
            f->vkGetInstanceProcAddr(in->inst, "vkCreateDebugUtilsMessengerEXT");
        f->vkDestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)
            f->vkGetInstanceProcAddr(in->inst, "vkDestroyDebugUtilsMessengerEXT");
        if (f->vkCreateDebugUtilsMessengerEXT && f->vkDestroyDebugUtilsMessengerEXT &&
            f->vkCreateDebugUtilsMessengerEXT(in->inst, &mci, NULL, &in->messenger) != VK_SUCCESS)
            in->messenger = VK_NULL_HANDLE;
    }
    return FLUX_OK;
}

void vk_instance_destroy(vk_instance *in) {
    if (in->inst) {
        if (in->messenger && in->f.vkDestroyDebugUtilsMessengerEXT)
            in->f.vkDestroyDebugUtilsMessengerEXT(in->inst, in->messenger, NULL);
        in->f.vkDestroyInstance(in->inst, NULL);
    }
    if (in->lib) dlclose(in->lib);
    memset(in, 0, sizeof *in);
}

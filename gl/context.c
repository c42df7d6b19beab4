/* libterra-gl: a headless OpenGL 4.5 core context on EGL's surfaceless platform (Mesa).
 *
 * eglGetDisplay(EGL_DEFAULT_DISPLAY) needs a display server; the surfaceless platform does not,
 * and renders into framebuffer objects only, which is all the renderer uses headless. */
#include "terra/gl.h"

#include <epoxy/egl.h>
#include <epoxy/gl.h>
#include <string.h>

struct terra_gl_context {
    EGLDisplay display;
    EGLContext context;
};

static bool has_ext(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

terra_status terra_gl_context_create_headless(terra_gl_context **out) {
    *out = NULL;
    const char *client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!client || !has_ext(client, "EGL_MESA_platform_surfaceless"))
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: EGL has no surfaceless platform (EGL_MESA_platform_surfaceless); "
                                               "install libegl-mesa0 and libgl1-mesa-dri");
    EGLDisplay dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL);
    EGLint major = 0, minor = 0;
    if (dpy == EGL_NO_DISPLAY || !eglInitialize(dpy, &major, &minor))
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: cannot initialise the surfaceless EGL display (EGL error 0x%x)",
                          (unsigned)eglGetError());
    terra_status st = TERRA_OK;
    EGLContext ctx = EGL_NO_CONTEXT;
    const char *exts = eglQueryString(dpy, EGL_EXTENSIONS);
    if (!has_ext(exts, "EGL_KHR_surfaceless_context")) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "gl: EGL %d.%d lacks EGL_KHR_surfaceless_context", major, minor);
        goto fail;
    }
    if (!eglBindAPI(EGL_OPENGL_API)) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "gl: EGL cannot bind the OpenGL API (EGL error 0x%x)", (unsigned)eglGetError());
        goto fail;
    }
    const EGLint cfg_attrs[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_SURFACE_TYPE, 0, EGL_NONE};
    EGLConfig cfg = NULL;
    EGLint ncfg = 0;
    if (!eglChooseConfig(dpy, cfg_attrs, &cfg, 1, &ncfg) || ncfg < 1) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "gl: no EGL config renders OpenGL (EGL error 0x%x)", (unsigned)eglGetError());
        goto fail;
    }
    const EGLint ctx_attrs[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5,
                                EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    ctx = eglCreateContext(dpy, cfg, EGL_NO_CONTEXT, ctx_attrs);
    if (ctx == EGL_NO_CONTEXT) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "gl: no OpenGL 4.5 core context (EGL error 0x%x)", (unsigned)eglGetError());
        goto fail;
    }
    if (!eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx)) {
        st = terra_fail(TERRA_E_UNSUPPORTED, "gl: cannot make the context current (EGL error 0x%x)", (unsigned)eglGetError());
        goto fail;
    }
    terra_gl_context *c = terra_calloc(1, sizeof *c);
    if (!c) {
        st = terra_fail(TERRA_E_NOMEM, "gl: out of memory");
        goto fail;
    }
    c->display = dpy;
    c->context = ctx;
    *out = c;
    return TERRA_OK;
fail:
    if (ctx != EGL_NO_CONTEXT) {
        eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(dpy, ctx);
    }
    eglTerminate(dpy);
    return st;
}

/* The display is left initialised: it is one per process (the same handle every time), a later
 * context initialises it again at no cost, and eglTerminate would unload Mesa's driver, after
 * which leak checkers can no longer name the driver's one allocation kept for the process. */
void terra_gl_context_destroy(terra_gl_context *c) {
    if (!c) return;
    eglMakeCurrent(c->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(c->display, c->context);
    eglReleaseThread();
    terra_free(c);
}

const char *terra_gl_renderer_name(void) {
    const char *s = (const char *)glGetString(GL_RENDERER);
    return s ? s : "";
}

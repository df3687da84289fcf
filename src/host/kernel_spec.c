/* `mechlab --install-kernel [--user | --prefix P]`: writes the Jupyter kernel spec
 * (kernel.json and its logos) into share/jupyter/kernels/mechlab of the prefix (default
 * /usr/local, where `jupyter kernelspec list` looks), or of the user's data directory. The spec
 * runs this very executable, so a build tree's spec tests that build. The logos are drawn by
 * mechlab itself (mech.display.logo). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "host/host.h"
#include "io/csv.h"
#include "io/json.h"
#include "io/os.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "%s: --install-kernel: %s%s%s\n", mh_progname, what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

int mh_install_kernel(lua_State *L, const char *prefix, bool user) {
    char dir[PATH_MAX], exe[PATH_MAX];
    int n;
    if (user) {
        const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
        if (xdg && *xdg) n = snprintf(dir, sizeof dir, "%s/jupyter/kernels/mechlab", xdg);
        else if (home && *home) n = snprintf(dir, sizeof dir, "%s/.local/share/jupyter/kernels/mechlab", home);
        else return fail("--user needs HOME or XDG_DATA_HOME", NULL);
    } else {
        n = snprintf(dir, sizeof dir, "%s/share/jupyter/kernels/mechlab", prefix ? prefix : "/usr/local");
    }
    if (n < 0 || n >= (int)sizeof dir) return fail("the directory's name is too long", NULL);
    if (ml_executable(exe, sizeof exe) != ML_OK) return fail("cannot find this executable", ml_last_error());
    if (ml_mkdir_p(dir) != ML_OK) return fail("cannot create the directory", ml_last_error());

    ml_json *spec = ml_json_object(), *argv = ml_json_array(), *meta = ml_json_object();
    if (!spec || !argv || !meta) return fail("not enough memory", NULL);
    ml_json_append(argv, ml_json_string(exe));
    ml_json_append(argv, ml_json_string("--kernel"));
    ml_json_append(argv, ml_json_string("{connection_file}"));
    ml_json_set(spec, "argv", argv);
    ml_json_set(spec, "display_name", ml_json_string("mechlab (Lua " LUA_VERSION_MAJOR "." LUA_VERSION_MINOR ")"));
    ml_json_set(spec, "language", ml_json_string("lua"));
    ml_json_set(spec, "interrupt_mode", ml_json_string("signal"));
    ml_json_set(meta, "mechlab_version", ml_json_string(MECHLAB_VERSION));
    ml_json_set(spec, "metadata", meta);
    size_t len;
    char *text = ml_json_write(spec, 2, &len);
    ml_json_free(spec);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/kernel.json", dir);
    if (!text || ml_write_file_atomic(path, text, len) != ML_OK) {
        free(text);
        return fail("cannot write kernel.json", ml_last_error());
    }
    free(text);

    static const int sizes[] = {32, 64};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        snprintf(path, sizeof path, "%s/logo-%dx%d.png", dir, sizes[i], sizes[i]);
        lua_getglobal(L, "require");
        lua_pushliteral(L, "mech.display");
        int status = mh_docall(L, 1, 1);
        if (status == LUA_OK) {
            lua_getfield(L, -1, "logo");
            lua_remove(L, -2);
            lua_pushstring(L, path);
            lua_pushinteger(L, sizes[i]);
            status = mh_docall(L, 2, 0);
        }
        if (status != LUA_OK) {
            fail("cannot draw the logo", lua_tostring(L, -1));
            lua_pop(L, 1);
            return 1;
        }
    }
    printf("installed the mechlab kernel spec in %s\n", dir);
    return 0;
}

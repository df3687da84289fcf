/* The Jupyter kernel: `mechlab --kernel CONNECTION_FILE` speaks the Jupyter messaging protocol
 * (version 5.3) over ZeroMQ itself, with HMAC-SHA256 signatures from OpenSSL's libcrypto. No
 * Python sits in its path. Cells run as REPL chunks (repl.c: expressions return their value,
 * top-level locals persist), completion is the REPL's (complete.c), inspection is mech.help,
 * and values are shown through mech.display (lua/mech/display.lua), which makes a MIME bundle.
 *
 * One thread serves the shell, control and stdin sockets and runs the cells; a second one only
 * echoes heartbeats, so a long cell never looks dead. An interrupt is SIGINT (the kernel spec's
 * interrupt_mode "signal"), which run.c turns into the same stop as Ctrl-C in the REPL.
 * Output written to file descriptors 1 and 2 (print, io.write, C code, child processes) goes to
 * temporary files that are sent as stream messages at the end of a cell and before each display.
 * Messages that are malformed, wrongly signed or on the wrong channel are refused with a line on
 * the kernel's own stderr and the kernel keeps serving. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <zmq.h>

#include <lauxlib.h>
#include <lua.h>

#include "host/host.h"
#include "io/json.h"

enum { CH_SHELL, CH_CONTROL, CH_STDIN, CH_IOPUB, CH_HB, CH_COUNT };
static const char *const channel_names[CH_COUNT] = {"shell", "control", "stdin", "iopub", "hb"};
static const char *const port_keys[CH_COUNT] = {"shell_port", "control_port", "stdin_port", "iopub_port", "hb_port"};

enum {
    MAX_FRAMES = 64,                    /* identities + delimiter + 5 parts + a few buffers */
    MAX_MESSAGE = 64 << 20,             /* bytes of one frame; larger ones drop the peer */
    MAX_STREAM = 8 << 20,               /* bytes of one stream message; the rest is cut */
};
static const char DELIM[] = "<IDS|MSG>";

typedef struct {
    void *ctx;
    void *sock[CH_COUNT];
    unsigned char key[1024];
    size_t keylen;
    char session[40];
    FILE *log;          /* the kernel's own stderr (fd 2 carries the cells' output) */
    int count;          /* execution count */
    char **history;     /* history[i]: the code of cell i + 1 */
    int nhistory;
    const ml_json *parent; /* header of the request being served (iopub's parent) */
    lua_State *L;
    volatile sig_atomic_t quit, restart;
    unsigned long refused, served;
    EVP_MAC *hmac;          /* fetched once, before any second thread */
    pthread_t main_thread;
    volatile sig_atomic_t watch_stop; /* ends the control watcher of a running cell */
} kernel;

static kernel K;

typedef struct {
    size_t nframes;
    zmq_msg_t frames[MAX_FRAMES];
    size_t delim;       /* index of the delimiter; identities are the frames before it */
    ml_json *header, *parent, *metadata, *content;
    const char *type;
} message;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("mechlab kernel: ", K.log);
    vfprintf(K.log, fmt, ap);
    fputc('\n', K.log);
    fflush(K.log);
    va_end(ap);
}

/* ------------------------------------------------------------------------------------------ */
/* Text and encodings                                                                           */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0;
    if (c == 0xF4 && s[1] >= 0x90) return 0; /* beyond U+10FFFF */
    return len;
}

/* A JSON string of s with every invalid UTF-8 byte replaced by U+FFFD (output is data). */
static ml_json *text_json(const char *s, size_t n) {
    char *buf = malloc(n * 3 + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0) {
            memcpy(buf + o, "\xEF\xBF\xBD", 3), o += 3, i++;
        } else {
            memcpy(buf + o, s + i, k), o += k, i += k;
        }
    }
    ml_json *j = ml_json_string_n(buf, o);
    free(buf);
    return j;
}

/* Byte offset of code point `cp` in s (the protocol counts cursor positions in code points). */
static size_t cp_to_byte(const char *s, size_t n, int64_t cp) {
    size_t i = 0;
    for (int64_t c = 0; i < n && c < cp; c++) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

static int64_t byte_to_cp(const char *s, size_t b) {
    int64_t c = 0;
    for (size_t i = 0; i < b; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    return c;
}

static void new_uuid(char out[40]) {
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1)
        for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)rand();
    b[6] = (unsigned char)((b[6] & 0x0F) | 0x40), b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
    snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void iso_now(char out[40]) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 40, "%s.%06ldZ", base, (long)tv.tv_usec);
}

/* HMAC-SHA256 of the four parts, as lowercase hex (65 bytes with the NUL). */
static bool sign_parts(const char *const parts[4], const size_t lens[4], char hex[65]) {
    hex[0] = '\0';
    if (K.keylen == 0) return true; /* an empty key: signing disabled, by the protocol */
    EVP_MAC *hmac = K.hmac;
    EVP_MAC_CTX *h = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t maclen = 0;
    bool ok = h && EVP_MAC_init(h, K.key, K.keylen, params) == 1;
    for (int i = 0; ok && i < 4; i++) ok = EVP_MAC_update(h, (const unsigned char *)parts[i], lens[i]) == 1;
    ok = ok && EVP_MAC_final(h, mac, &maclen, sizeof mac) == 1;
    EVP_MAC_CTX_free(h);
    for (size_t i = 0; ok && i < maclen; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* Messages                                                                                     */

static void message_free(message *m) {
    for (size_t i = 0; i < m->nframes; i++) zmq_msg_close(&m->frames[i]);
    ml_json_free(m->header), ml_json_free(m->parent), ml_json_free(m->metadata), ml_json_free(m->content);
    memset(m, 0, sizeof *m);
}

static ml_json *frame_json(zmq_msg_t *f, const char *what, char *why, size_t whysize) {
    size_t off = 0;
    ml_json *j = ml_json_parse(zmq_msg_data(f), zmq_msg_size(f), &off);
    if (!j) snprintf(why, whysize, "%s is not JSON (byte %zu)", what, off);
    else if (j->type != ML_JSON_OBJECT) {
        snprintf(why, whysize, "%s is a JSON %s, not an object", what, ml_json_type_name(j->type));
        ml_json_free(j);
        j = NULL;
    }
    return j;
}

/* Receives one multipart message from sock. Returns 1 for a valid message, 0 for one that was
 * refused (the reason in why), -1 when nothing could be read. */
static int message_recv(void *sock, message *m, char *why, size_t whysize) {
    memset(m, 0, sizeof *m);
    int more = 1;
    bool too_many = false;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, m->nframes == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&f);
            if (m->nframes == 0) return -1;
            snprintf(why, whysize, "the message ended early (%s)", zmq_strerror(errno));
            return 0;
        }
        more = zmq_msg_more(&f);
        if (m->nframes < MAX_FRAMES) m->frames[m->nframes++] = f;
        else too_many = true, zmq_msg_close(&f); /* read the rest, keep nothing */
    }
    if (too_many) {
        snprintf(why, whysize, "more than %d frames", MAX_FRAMES);
        return 0;
    }
    size_t d = 0;
    while (d < m->nframes && !(zmq_msg_size(&m->frames[d]) == sizeof DELIM - 1 &&
                               memcmp(zmq_msg_data(&m->frames[d]), DELIM, sizeof DELIM - 1) == 0))
        d++;
    if (d == m->nframes) {
        snprintf(why, whysize, "no <IDS|MSG> delimiter among %zu frames", m->nframes);
        return 0;
    }
    if (m->nframes - d < 6) {
        snprintf(why, whysize, "%zu frames after the delimiter, expected signature, header, parent, metadata, content",
                 m->nframes - d - 1);
        return 0;
    }
    m->delim = d;
    const char *parts[4];
    size_t lens[4];
    for (int i = 0; i < 4; i++) parts[i] = zmq_msg_data(&m->frames[d + 2 + i]), lens[i] = zmq_msg_size(&m->frames[d + 2 + i]);
    char hex[65];
    if (!sign_parts(parts, lens, hex)) {
        snprintf(why, whysize, "cannot compute the signature");
        return 0;
    }
    zmq_msg_t *sig = &m->frames[d + 1];
    size_t hexlen = strlen(hex);
    if (zmq_msg_size(sig) != hexlen || CRYPTO_memcmp(zmq_msg_data(sig), hex, hexlen) != 0) {
        snprintf(why, whysize, "wrong signature");
        return 0;
    }
    if (!(m->header = frame_json(&m->frames[d + 2], "the header", why, whysize)) ||
        !(m->parent = frame_json(&m->frames[d + 3], "the parent header", why, whysize)) ||
        !(m->metadata = frame_json(&m->frames[d + 4], "the metadata", why, whysize)) ||
        !(m->content = frame_json(&m->frames[d + 5], "the content", why, whysize)))
        return 0;
    const ml_json *t = ml_json_get(m->header, "msg_type"), *id = ml_json_get(m->header, "msg_id");
    if (!t || t->type != ML_JSON_STRING || t->len == 0 || strlen(t->str) != t->len || t->len > 64) {
        snprintf(why, whysize, "the header has no msg_type string");
        return 0;
    }
    if (!id || id->type != ML_JSON_STRING) {
        snprintf(why, whysize, "the header has no msg_id string");
        return 0;
    }
    m->type = t->str;
    return 1;
}

/* Sends a message of type `type` with `content` (taken) on sock, to the identities of `to` (a
 * request on a ROUTER socket) or, on iopub, under a topic. Returns false on failure (logged). */
static bool message_send(void *sock, const message *to, const ml_json *parent, const char *type, ml_json *content) {
    char id[40], date[40];
    new_uuid(id);
    iso_now(date);
    ml_json *header = ml_json_object();
    if (header) {
        ml_json_set(header, "msg_id", ml_json_string(id));
        ml_json_set(header, "session", ml_json_string(K.session));
        ml_json_set(header, "username", ml_json_string("mechlab"));
        ml_json_set(header, "date", ml_json_string(date));
        ml_json_set(header, "msg_type", ml_json_string(type));
        ml_json_set(header, "version", ml_json_string("5.3"));
    }
    ml_json *empty = ml_json_object();
    size_t lens[4] = {0};
    char *parts[4] = {header ? ml_json_write(header, 0, &lens[0]) : NULL,
                      parent ? ml_json_write(parent, 0, &lens[1]) : ml_json_write(empty, 0, &lens[1]),
                      ml_json_write(empty, 0, &lens[2]), content ? ml_json_write(content, 0, &lens[3]) : NULL};
    ml_json_free(header), ml_json_free(empty), ml_json_free(content);
    bool ok = parts[0] && parts[1] && parts[2] && parts[3];
    char hex[65];
    ok = ok && sign_parts((const char *const *)parts, lens, hex);
    if (!ok) {
        logf_("cannot build the %s message: %s", type, ml_last_error());
    } else {
        int flags = ZMQ_SNDMORE;
        if (to) {
            for (size_t i = 0; ok && i < to->delim; i++)
                ok = zmq_send(sock, zmq_msg_data((zmq_msg_t *)&to->frames[i]), zmq_msg_size((zmq_msg_t *)&to->frames[i]), flags) >= 0;
        } else {
            char topic[128];
            snprintf(topic, sizeof topic, "kernel.%s.%s", K.session, type);
            ok = zmq_send(sock, topic, strlen(topic), flags) >= 0;
        }
        ok = ok && zmq_send(sock, DELIM, sizeof DELIM - 1, flags) >= 0;
        ok = ok && zmq_send(sock, hex, strlen(hex), flags) >= 0;
        for (int i = 0; ok && i < 4; i++) ok = zmq_send(sock, parts[i], lens[i], i < 3 ? flags : 0) >= 0;
        if (!ok) logf_("cannot send the %s message: %s", type, zmq_strerror(errno));
    }
    for (int i = 0; i < 4; i++) free(parts[i]);
    return ok;
}

static void publish(const char *type, ml_json *content) { message_send(K.sock[CH_IOPUB], NULL, K.parent, type, content); }

static void publish_status(const char *state) {
    ml_json *c = ml_json_object();
    if (c) ml_json_set(c, "execution_state", ml_json_string(state));
    publish("status", c);
}

/* ------------------------------------------------------------------------------------------ */
/* Output of the cells                                                                          */

/* Sends what was written to fd (1: stdout, 2: stderr) since the last call, and empties it. */
static void drain_fd(int fd, const char *name) {
    if (fd == STDOUT_FILENO) fflush(stdout);
    else fflush(stderr);
    off_t n = lseek(fd, 0, SEEK_CUR);
    if (n <= 0) return;
    size_t len = (size_t)n > MAX_STREAM ? MAX_STREAM : (size_t)n;
    char *buf = malloc(len + 64);
    ssize_t got = buf ? pread(fd, buf, len, 0) : -1;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) logf_("cannot empty the %s file: %s", name, strerror(errno));
    if (got > 0) {
        size_t k = (size_t)got;
        if ((size_t)n > len) k += (size_t)snprintf(buf + k, 64, "\n[%lld more bytes cut]\n", (long long)(n - (off_t)len));
        ml_json *c = ml_json_object();
        if (c) {
            ml_json_set(c, "name", ml_json_string(name));
            ml_json_set(c, "text", text_json(buf, k));
        }
        publish("stream", c);
    }
    free(buf);
}

static void drain_output(void) {
    drain_fd(STDOUT_FILENO, "stdout");
    drain_fd(STDERR_FILENO, "stderr");
}

/* The MIME bundle (a Lua table of strings, on top) as a JSON object: images base64. Pops it. */
static ml_json *bundle_json(lua_State *L) {
    ml_json *data = ml_json_object();
    if (!data) return NULL;
    if (lua_type(L, -1) == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            size_t len;
            if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
                const char *mime = lua_tostring(L, -2), *v = lua_tolstring(L, -1, &len);
                if (strncmp(mime, "image/", 6) == 0 && strcmp(mime, "image/svg+xml") != 0 && len < (size_t)1 << 30) {
                    unsigned char *b64 = malloc(4 * ((len + 2) / 3) + 1);
                    if (b64) {
                        int n = EVP_EncodeBlock(b64, (const unsigned char *)v, (int)len);
                        ml_json_set(data, mime, ml_json_string_n((const char *)b64, (size_t)n));
                        free(b64);
                    }
                } else {
                    ml_json_set(data, mime, text_json(v, len));
                }
            }
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (!ml_json_get(data, "text/plain")) ml_json_set(data, "text/plain", ml_json_string(""));
    return data;
}

/* mech.display's sink in the kernel: display_data with the bundle (argument 1). */
static int l_display_sink(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    drain_output(); /* what the cell printed before comes first */
    lua_settop(L, 1);
    ml_json *c = ml_json_object();
    if (c) {
        ml_json_set(c, "data", bundle_json(L));
        ml_json_set(c, "metadata", ml_json_object());
        ml_json_set(c, "transient", ml_json_object());
    }
    publish("display_data", c);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                     */

static const char *str_field(const ml_json *o, const char *key, size_t *len) {
    const ml_json *v = ml_json_get(o, key);
    if (!v || v->type != ML_JSON_STRING) return NULL;
    if (len) *len = v->len;
    return v->str;
}

/* An optional boolean field: def when absent; -1 when present but not a boolean. */
static int bool_field(const ml_json *o, const char *key, int def) {
    const ml_json *v = ml_json_get(o, key);
    if (!v) return def;
    return v->type == ML_JSON_BOOL ? v->boolean : -1;
}

static bool int_field(const ml_json *o, const char *key, int64_t *out) {
    const ml_json *v = ml_json_get(o, key);
    if (!v || v->type != ML_JSON_NUMBER || !v->is_int) return false;
    *out = v->integer;
    return true;
}

static ml_json *ok_reply(void) {
    ml_json *c = ml_json_object();
    if (c) ml_json_set(c, "status", ml_json_string("ok"));
    return c;
}

/* A reply refusing the request's content: status "error" (the request was well formed). */
static ml_json *bad_request(const message *m, const char *what) {
    logf_("refused a message of type %s: %s", m->type, what);
    K.refused++;
    ml_json *c = ml_json_object();
    if (c) {
        ml_json_set(c, "status", ml_json_string("error"));
        ml_json_set(c, "ename", ml_json_string("BadRequest"));
        ml_json_set(c, "evalue", ml_json_string(what));
        ml_json_set(c, "traceback", ml_json_array());
    }
    return c;
}

static ml_json *do_kernel_info(const message *m) {
    (void)m;
    ml_json *c = ok_reply(), *li = ml_json_object(), *links = ml_json_array();
    if (li) {
        ml_json_set(li, "name", ml_json_string("lua"));
        ml_json_set(li, "version", ml_json_string(LUA_VERSION_MAJOR "." LUA_VERSION_MINOR "." LUA_VERSION_RELEASE));
        ml_json_set(li, "mimetype", ml_json_string("text/x-lua"));
        ml_json_set(li, "file_extension", ml_json_string(".lua"));
        ml_json_set(li, "pygments_lexer", ml_json_string("lua"));
        ml_json_set(li, "codemirror_mode", ml_json_string("lua"));
    }
    if (c) {
        char banner[256];
        snprintf(banner, sizeof banner, "mechlab %s (git %s), %s. Tab completes, Shift-Tab shows mech.help.",
                 MECHLAB_VERSION, mechlab_git, LUA_RELEASE);
        ml_json_set(c, "protocol_version", ml_json_string("5.3"));
        ml_json_set(c, "implementation", ml_json_string("mechlab"));
        ml_json_set(c, "implementation_version", ml_json_string(MECHLAB_VERSION));
        ml_json_set(c, "language_info", li);
        ml_json_set(c, "banner", ml_json_string(banner));
        ml_json_set(c, "help_links", links);
        ml_json_set(c, "debugger", ml_json_bool(false));
    } else {
        ml_json_free(li), ml_json_free(links);
    }
    return c;
}

/* The error of a failed cell (message on top of L, popped) as ename, evalue and traceback lines. */
static void error_fields(lua_State *L, bool syntax, ml_json *c) {
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    if (!msg) msg = "(error object is not a string)", len = strlen(msg);
    static const char tail[] = "\n\t[C]: in ?"; /* the host's own frame says nothing */
    while (len >= sizeof tail - 1 && memcmp(msg + len - (sizeof tail - 1), tail, sizeof tail - 1) == 0) len -= sizeof tail - 1;
    const char *nl = memchr(msg, '\n', len);
    size_t first = nl ? (size_t)(nl - msg) : len;
    static const char intr[] = "interrupted";
    bool interrupted = first >= sizeof intr - 1 && memcmp(msg + first - (sizeof intr - 1), intr, sizeof intr - 1) == 0;
    ml_json_set(c, "ename", ml_json_string(syntax ? "SyntaxError" : interrupted ? "Interrupted" : "LuaError"));
    ml_json_set(c, "evalue", text_json(msg, first));
    ml_json *tb = ml_json_array();
    for (size_t i = 0; tb && i <= len;) {
        const char *e = memchr(msg + i, '\n', len - i);
        size_t n = e ? (size_t)(e - msg) - i : len - i;
        ml_json_append(tb, text_json(msg + i, n));
        i += n + 1;
    }
    ml_json_set(c, "traceback", tb);
    lua_pop(L, 1);
}

static void *control_watch(void *arg);

static void keep_history(const char *code, size_t len) {
    char **h = realloc(K.history, (size_t)(K.nhistory + 1) * sizeof *h);
    if (!h) return;
    K.history = h;
    char *s = malloc(len + 1);
    if (s) memcpy(s, code, len), s[len] = '\0';
    K.history[K.nhistory++] = s;
}

static ml_json *do_execute(const message *m) {
    lua_State *L = K.L;
    size_t len;
    const char *code = str_field(m->content, "code", &len);
    int silent = bool_field(m->content, "silent", 0);
    int store = bool_field(m->content, "store_history", silent ? 0 : 1);
    if (!code) return bad_request(m, "field 'code' expected a string");
    if (silent < 0 || store < 0) return bad_request(m, "fields 'silent' and 'store_history' expected booleans");
    if (store) {
        K.count++;
        keep_history(code, len);
    }
    ml_json *in = ml_json_object();
    if (in) {
        ml_json_set(in, "code", text_json(code, len));
        ml_json_set(in, "execution_count", ml_json_int(K.count));
    }
    if (!silent) publish("execute_input", in);
    else ml_json_free(in);

    int top = lua_gettop(L);
    char name[32];
    snprintf(name, sizeof name, "=In[%d]", K.count);
    int status = mh_load_cell(L, code, len, name);
    bool syntax = status != LUA_OK;
    if (status == LUA_OK) {
        mh_use_env(L);
        K.watch_stop = 0;
        pthread_t watcher;
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        pthread_sigmask(SIG_BLOCK, &block, &old); /* the watcher never takes the SIGINT itself */
        bool watching = pthread_create(&watcher, NULL, control_watch, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        status = mh_docall(L, 0, LUA_MULTRET);
        K.watch_stop = 1;
        if (watching) pthread_join(watcher, NULL);
    }
    ml_json *reply = ml_json_object();
    if (!reply) {
        lua_settop(L, top);
        return NULL;
    }
    if (status == LUA_OK && lua_gettop(L) > top && !silent) {
        /* the value's bundle: mech.display's bundle(...) of every result */
        int n = lua_gettop(L) - top;
        lua_getglobal(L, "require");
        lua_pushliteral(L, "mech.display");
        if (mh_docall(L, 1, 1) == LUA_OK) {
            lua_getfield(L, -1, "bundle");
            lua_remove(L, -2);
            lua_insert(L, top + 1);
            status = mh_docall(L, n, 1);
        } else {
            lua_pushfstring(L, "cannot load mech.display: %s", lua_tostring(L, -1));
            lua_remove(L, -2);
            status = LUA_ERRRUN;
        }
        drain_output();
        if (status == LUA_OK) {
            ml_json *r = ml_json_object();
            if (r) {
                ml_json_set(r, "execution_count", ml_json_int(K.count));
                ml_json_set(r, "data", bundle_json(L));
                ml_json_set(r, "metadata", ml_json_object());
            }
            publish("execute_result", r);
        }
    } else {
        drain_output();
    }
    if (status != LUA_OK) {
        ml_json *e = ml_json_object();
        error_fields(L, syntax, reply);
        if (e) {
            ml_json_set(e, "ename", ml_json_string(ml_json_get(reply, "ename")->str));
            ml_json_set(e, "evalue", ml_json_string(ml_json_get(reply, "evalue")->str));
            ml_json *tb = ml_json_array();
            const ml_json *rtb = ml_json_get(reply, "traceback");
            for (size_t i = 0; tb && rtb && i < rtb->count; i++) ml_json_append(tb, ml_json_string(rtb->items[i]->str));
            ml_json_set(e, "traceback", tb);
        }
        publish("error", e);
        ml_json_set(reply, "status", ml_json_string("error"));
    } else {
        ml_json_set(reply, "status", ml_json_string("ok"));
        ml_json_set(reply, "user_expressions", ml_json_object());
        ml_json_set(reply, "payload", ml_json_array());
    }
    ml_json_set(reply, "execution_count", ml_json_int(K.count));
    lua_settop(L, top);
    return reply;
}

static ml_json *do_is_complete(const message *m) {
    lua_State *L = K.L;
    size_t len;
    const char *code = str_field(m->content, "code", &len);
    if (!code) return bad_request(m, "field 'code' expected a string");
    const char *verdict = "complete";
    int top = lua_gettop(L);
    lua_pushliteral(L, "return ");
    lua_pushlstring(L, code, len);
    lua_concat(L, 2);
    size_t rlen;
    const char *ret = lua_tolstring(L, -1, &rlen);
    if (luaL_loadbuffer(L, ret, rlen, "=cell") != LUA_OK) {
        lua_pop(L, 1);
        int status = luaL_loadbuffer(L, code, len, "=cell");
        if (status != LUA_OK) verdict = mh_incomplete(L, status) ? "incomplete" : "invalid";
    }
    lua_settop(L, top);
    ml_json *c = ml_json_object();
    if (c) {
        ml_json_set(c, "status", ml_json_string(verdict));
        if (strcmp(verdict, "incomplete") == 0) ml_json_set(c, "indent", ml_json_string("  "));
    }
    return c;
}

/* Cursor position (code points) of a complete or inspect request, as a byte offset into code. */
static bool cursor_of(const message *m, const char *code, size_t len, size_t *cursor) {
    int64_t cp;
    if (!int_field(m->content, "cursor_pos", &cp) || cp < 0) return false;
    *cursor = cp_to_byte(code, len, cp);
    return true;
}

static size_t word_start(const char *code, size_t cursor) {
    size_t s = cursor;
    while (s > 0 && code[s - 1] != '\0' && !strchr(mh_word_breaks, code[s - 1])) s--;
    return s;
}

static ml_json *do_complete(const message *m) {
    lua_State *L = K.L;
    size_t len, cursor;
    const char *code = str_field(m->content, "code", &len);
    if (!code) return bad_request(m, "field 'code' expected a string");
    if (!cursor_of(m, code, len, &cursor)) return bad_request(m, "field 'cursor_pos' expected an integer >= 0");
    size_t start = word_start(code, cursor);
    int top = lua_gettop(L);
    lua_pushlstring(L, code, cursor); /* the completer reads the line up to the word */
    lua_pushlstring(L, code + start, cursor - start);
    mh_completions(L, lua_tostring(L, top + 1), (int)start, lua_tostring(L, top + 2));
    ml_json *matches = ml_json_array();
    size_t n = lua_rawlen(L, -1);
    for (size_t i = 1; matches && i <= n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        size_t k;
        const char *s = lua_tolstring(L, -1, &k);
        ml_json_append(matches, text_json(s, k));
        lua_pop(L, 1);
    }
    lua_settop(L, top);
    ml_json *c = ok_reply();
    if (c) {
        ml_json_set(c, "matches", matches);
        ml_json_set(c, "cursor_start", ml_json_int(byte_to_cp(code, start)));
        ml_json_set(c, "cursor_end", ml_json_int(byte_to_cp(code, cursor)));
        ml_json_set(c, "metadata", ml_json_object());
    } else {
        ml_json_free(matches);
    }
    return c;
}

/* The help text of the name at the cursor (mech.help's entry; the value's, when it is found by
 * a lookup that runs no code). */
static ml_json *do_inspect(const message *m) {
    lua_State *L = K.L;
    size_t len, cursor;
    const char *code = str_field(m->content, "code", &len);
    if (!code) return bad_request(m, "field 'code' expected a string");
    if (!cursor_of(m, code, len, &cursor)) return bad_request(m, "field 'cursor_pos' expected an integer >= 0");
    size_t start = word_start(code, cursor), end = cursor;
    if (start == end && cursor > 0 && code[cursor - 1] == '(') /* f(| : the function before */
        end = cursor - 1, start = word_start(code, end);
    while (end < len && !strchr(mh_word_breaks, code[end])) end++;
    int top = lua_gettop(L);
    bool found = false;
    const char *text = "";
    if (end > start && end - start < 256) {
        lua_getglobal(L, "require");
        lua_pushliteral(L, "mech.help");
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
            lua_getfield(L, -1, "text");
            const char *word = code + start;
            size_t wlen = end - start;
            const char *colon = memchr(word, ':', wlen);
            mh_lookup_path(L, word, colon ? (size_t)(colon - word) : wlen);
            if (lua_isnil(L, -1) || colon) {
                lua_pop(L, 1);
                lua_pushlstring(L, word, wlen); /* a name: "model:forward", "mech.zeros" */
            }
            if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) {
                text = lua_tostring(L, -1);
                found = strncmp(text, "help: no entry", 14) != 0;
            }
        }
    }
    ml_json *c = ok_reply(), *data = ml_json_object();
    if (data && found) ml_json_set(data, "text/plain", text_json(text, strlen(text)));
    lua_settop(L, top);
    if (c) {
        ml_json_set(c, "found", ml_json_bool(found));
        ml_json_set(c, "data", data);
        ml_json_set(c, "metadata", ml_json_object());
    } else {
        ml_json_free(data);
    }
    return c;
}

static ml_json *history_entry(int i) {
    ml_json *e = ml_json_array();
    if (e) {
        ml_json_append(e, ml_json_int(0));
        ml_json_append(e, ml_json_int(i + 1));
        ml_json_append(e, ml_json_string(K.history[i] ? K.history[i] : ""));
    }
    return e;
}

/* This session's cells: "tail" (the last n), "range" (start..stop of session 0) and "search"
 * (a substring of the pattern without its '*'). */
static ml_json *do_history(const message *m) {
    const char *access = str_field(m->content, "hist_access_type", NULL);
    if (!access) return bad_request(m, "field 'hist_access_type' expected a string");
    ml_json *h = ml_json_array();
    int64_t a = 0, b = K.nhistory;
    if (strcmp(access, "tail") == 0) {
        int64_t n = 10;
        int_field(m->content, "n", &n);
        a = n < 0 ? 0 : n < K.nhistory ? K.nhistory - n : 0;
    } else if (strcmp(access, "range") == 0) {
        int_field(m->content, "start", &a), int_field(m->content, "stop", &b);
        a = a < 1 ? 0 : a - 1;
        b = b < 0 || b > K.nhistory ? K.nhistory : b - 1;
    }
    const char *pattern = strcmp(access, "search") == 0 ? str_field(m->content, "pattern", NULL) : NULL;
    char needle[256] = "";
    if (pattern) {
        size_t k = 0;
        for (const char *p = pattern; *p && k + 1 < sizeof needle; p++)
            if (*p != '*' && *p != '?') needle[k++] = *p;
        needle[k] = '\0';
    }
    for (int64_t i = a; h && i < b; i++)
        if (!pattern || (K.history[i] && strstr(K.history[i], needle))) ml_json_append(h, history_entry((int)i));
    ml_json *c = ok_reply();
    if (c) ml_json_set(c, "history", h);
    else ml_json_free(h);
    return c;
}

static ml_json *do_comm_info(const message *m) {
    (void)m;
    ml_json *c = ok_reply();
    if (c) ml_json_set(c, "comms", ml_json_object());
    return c;
}

static ml_json *do_shutdown(const message *m) {
    int restart = bool_field(m->content, "restart", 0);
    if (restart < 0) return bad_request(m, "field 'restart' expected a boolean");
    K.quit = true;
    K.restart = restart;
    ml_json *c = ok_reply();
    if (c) ml_json_set(c, "restart", ml_json_bool(restart));
    return c;
}

/* An interrupt request while idle: nothing runs, so nothing to stop (a running cell is stopped
 * by SIGINT, the kernel spec's interrupt_mode). */
static ml_json *do_interrupt(const message *m) {
    (void)m;
    return ok_reply();
}

/* While a cell runs, a second thread owns the control socket (handed over and back by thread
 * creation and join, which order the memory as ZeroMQ asks): an interrupt_request stops the
 * cell as SIGINT does, kernel_info is answered, a shutdown_request is answered and stops the
 * cell. So interrupt_mode "message" works too, and the control channel answers during a cell. */
static void *control_watch(void *arg) {
    (void)arg;
    void *sock = K.sock[CH_CONTROL];
    while (!K.watch_stop) {
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 50) <= 0 || !(item.revents & ZMQ_POLLIN)) continue;
        message m;
        char why[256];
        int got = message_recv(sock, &m, why, sizeof why);
        if (got == 0) logf_("refused a message on the control channel: %s", why);
        if (got == 1) {
            ml_json *reply = NULL;
            const char *reply_type = NULL;
            if (strcmp(m.type, "interrupt_request") == 0) {
                pthread_kill(K.main_thread, SIGINT);
                reply = ok_reply(), reply_type = "interrupt_reply";
            } else if (strcmp(m.type, "kernel_info_request") == 0) {
                reply = do_kernel_info(&m), reply_type = "kernel_info_reply";
            } else if (strcmp(m.type, "shutdown_request") == 0) {
                int restart = bool_field(m.content, "restart", 0);
                K.restart = restart > 0;
                K.quit = 1;
                reply = ok_reply(), reply_type = "shutdown_reply";
                if (reply) ml_json_set(reply, "restart", ml_json_bool(restart > 0));
                pthread_kill(K.main_thread, SIGINT);
            } else {
                logf_("refused a message of type %s on the control channel while a cell runs", m.type);
            }
            if (reply_type) message_send(sock, &m, m.header, reply_type, reply);
        }
        if (got >= 0) message_free(&m);
    }
    return NULL;
}

enum { ON_SHELL = 1, ON_CONTROL = 2 };
static const struct {
    const char *request, *reply;
    ml_json *(*fn)(const message *);
    int channels;
} handlers[] = {
    {"kernel_info_request", "kernel_info_reply", do_kernel_info, ON_SHELL | ON_CONTROL},
    {"execute_request", "execute_reply", do_execute, ON_SHELL},
    {"is_complete_request", "is_complete_reply", do_is_complete, ON_SHELL},
    {"complete_request", "complete_reply", do_complete, ON_SHELL},
    {"inspect_request", "inspect_reply", do_inspect, ON_SHELL},
    {"history_request", "history_reply", do_history, ON_SHELL},
    {"comm_info_request", "comm_info_reply", do_comm_info, ON_SHELL},
    {"shutdown_request", "shutdown_reply", do_shutdown, ON_SHELL | ON_CONTROL},
    {"interrupt_request", "interrupt_reply", do_interrupt, ON_CONTROL},
};

static void serve(int ch) {
    message m;
    char why[256];
    int got = message_recv(K.sock[ch], &m, why, sizeof why);
    if (got < 0) return;
    if (got == 0) {
        logf_("refused a message on the %s channel: %s", channel_names[ch], why);
        K.refused++;
        message_free(&m);
        return;
    }
    size_t i = 0, n = sizeof handlers / sizeof handlers[0];
    while (i < n && strcmp(handlers[i].request, m.type) != 0) i++;
    int mask = ch == CH_SHELL ? ON_SHELL : ch == CH_CONTROL ? ON_CONTROL : 0;
    if (i == n || !(handlers[i].channels & mask)) {
        logf_("refused a message of type %s on the %s channel: %s", m.type, channel_names[ch],
              i == n ? "unknown message type" : "it belongs on another channel");
        K.refused++;
        message_free(&m);
        return;
    }
    K.served++;
    K.parent = m.header;
    publish_status("busy");
    ml_json *reply = handlers[i].fn(&m);
    message_send(K.sock[ch], &m, m.header, handlers[i].reply, reply);
    publish_status("idle");
    K.parent = NULL;
    message_free(&m);
}

/* ------------------------------------------------------------------------------------------ */
/* Start-up and the loop                                                                        */

static void *heartbeat(void *sock) {
    for (;;) { /* echo until the context terminates */
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, 0) < 0) {
            zmq_msg_close(&f);
            if (errno == EINTR) continue;
            break;
        }
        if (zmq_msg_send(&f, sock, 0) < 0) zmq_msg_close(&f);
    }
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(sock);
    return NULL;
}

static void on_sigint_idle(int sig) { (void)sig; } /* an interrupt with nothing running */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 > cap) {
            if (cap > (1u << 20)) break; /* a connection file is a few hundred bytes */
            char *nb = realloc(buf, cap = cap * 2 + 4096);
            if (!nb) break;
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Reads the connection file and binds the five sockets. Returns false after logging why. */
static bool connect_kernel(const char *path) {
    size_t len = 0, off = 0;
    char *text = read_file(path, &len);
    if (!text) {
        logf_("cannot read the connection file '%s': %s", path, strerror(errno));
        return false;
    }
    ml_json *cf = ml_json_parse(text, len, &off);
    free(text);
    if (!cf || cf->type != ML_JSON_OBJECT) {
        logf_("the connection file '%s' is not a JSON object (byte %zu)", path, off);
        ml_json_free(cf);
        return false;
    }
    bool ok = true;
    const char *transport = str_field(cf, "transport", NULL), *ip = str_field(cf, "ip", NULL);
    const char *scheme = str_field(cf, "signature_scheme", NULL), *key = str_field(cf, "key", &K.keylen);
    if (!transport) transport = "tcp";
    if (!ip || (strcmp(transport, "tcp") != 0 && strcmp(transport, "ipc") != 0)) {
        logf_("the connection file needs 'ip' and a transport 'tcp' or 'ipc'");
        ok = false;
    }
    if (ok && key && K.keylen > 0 && (!scheme || strcmp(scheme, "hmac-sha256") != 0)) {
        logf_("signature scheme '%s' is not supported (hmac-sha256 is)", scheme ? scheme : "(none)");
        ok = false;
    }
    if (ok && (!key || K.keylen >= sizeof K.key)) {
        logf_("the connection file needs a 'key' string shorter than %zu bytes", sizeof K.key);
        ok = false;
    }
    if (ok) memcpy(K.key, key, K.keylen);
    static const int types[CH_COUNT] = {ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_PUB, ZMQ_REP};
    for (int ch = 0; ok && ch < CH_COUNT; ch++) {
        int64_t port;
        if (!int_field(cf, port_keys[ch], &port) || port < 0 || port > 65535) {
            logf_("the connection file needs '%s' (a port number)", port_keys[ch]);
            ok = false;
            break;
        }
        char endpoint[512];
        if (strcmp(transport, "tcp") == 0) snprintf(endpoint, sizeof endpoint, "tcp://%s:%d", ip, (int)port);
        else snprintf(endpoint, sizeof endpoint, "ipc://%s-%d", ip, (int)port);
        K.sock[ch] = zmq_socket(K.ctx, types[ch]);
        int linger = 1000;
        int64_t maxsize = MAX_MESSAGE;
        if (K.sock[ch]) {
            zmq_setsockopt(K.sock[ch], ZMQ_LINGER, &linger, sizeof linger);
            zmq_setsockopt(K.sock[ch], ZMQ_MAXMSGSIZE, &maxsize, sizeof maxsize);
        }
        if (!K.sock[ch] || zmq_bind(K.sock[ch], endpoint) != 0) {
            logf_("cannot bind the %s channel to %s: %s", channel_names[ch], endpoint, zmq_strerror(errno));
            ok = false;
        }
    }
    ml_json_free(cf);
    return ok;
}

/* Output of the cells goes to two unlinked temporary files on fds 1 and 2; input is empty. */
static bool redirect_output(void) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO), close(null);
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/mechlab-kernel-XXXXXX", tmp);
        int t = mkstemp(path);
        if (t < 0) {
            logf_("cannot create a temporary file in %s: %s", tmp, strerror(errno));
            return false;
        }
        unlink(path);
        fflush(fd == STDOUT_FILENO ? stdout : stderr);
        dup2(t, fd);
        close(t);
    }
    return true;
}

int mh_kernel(lua_State *L, const char *connection_file) {
    memset(&K, 0, sizeof K);
    K.L = L;
    int logfd = dup(STDERR_FILENO);
    K.log = logfd >= 0 ? fdopen(logfd, "w") : NULL;
    if (!K.log) K.log = stderr;
    new_uuid(K.session);
    K.main_thread = pthread_self();
    K.hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    /* zmq's I/O threads and the heartbeat inherit this mask: SIGINT reaches this thread only */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    K.ctx = zmq_ctx_new();
    bool ok = K.ctx && connect_kernel(connection_file);
    pthread_t hb;
    bool hb_started = ok && pthread_create(&hb, NULL, heartbeat, K.sock[CH_HB]) == 0;
    if (hb_started) K.sock[CH_HB] = NULL; /* the heartbeat thread owns it now */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    ok = ok && hb_started && redirect_output();

    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigint_idle;
    sigaction(SIGINT, &sa, &saved);
    if (ok) {
        /* values shown through mech.display; its sink publishes display_data */
        mh_make_env(L);
        lua_getglobal(L, "require");
        lua_pushliteral(L, "mech.display");
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
            lua_pushcfunction(L, l_display_sink);
            lua_setfield(L, -2, "sink");
        } else {
            logf_("cannot load mech.display: %s", lua_tostring(L, -1));
        }
        lua_pop(L, 1);
        lua_getglobal(L, "help"); /* help(x) as in the REPL */
        if (lua_isnil(L, -1)) {
            lua_getglobal(L, "mech");
            if (lua_istable(L, -1)) lua_getfield(L, -1, "help"), lua_setglobal(L, "help");
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        publish_status("starting");
        logf_("serving %s (session %s)", connection_file, K.session);
    }
    /* A client that started the kernel (jupyter_client sets JPY_PARENT_PID) and died without a
     * shutdown leaves it orphaned: it then shuts down by itself, as ipykernel does. */
    const char *parent_env = getenv("JPY_PARENT_PID");
    long parent = parent_env ? strtol(parent_env, NULL, 10) : 0;
    if (parent != (long)getppid()) parent = 0;
    while (ok && !K.quit) {
        zmq_pollitem_t items[3] = {{K.sock[CH_CONTROL], 0, ZMQ_POLLIN, 0},
                                   {K.sock[CH_SHELL], 0, ZMQ_POLLIN, 0},
                                   {K.sock[CH_STDIN], 0, ZMQ_POLLIN, 0}};
        int r = zmq_poll(items, 3, parent ? 1000 : -1);
        if (parent && (long)getppid() != parent) {
            logf_("the client that started this kernel (pid %ld) is gone", parent);
            break;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            logf_("poll failed: %s", zmq_strerror(errno));
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) serve(CH_CONTROL);
        else if (items[1].revents & ZMQ_POLLIN) serve(CH_SHELL);
        else if (items[2].revents & ZMQ_POLLIN) serve(CH_STDIN); /* the kernel asks nothing there */
    }
    sigaction(SIGINT, &saved, NULL);
    if (ok) logf_("shutting down%s (%lu requests served, %lu refused)", K.restart ? " for a restart" : "", K.served, K.refused);
    for (int ch = 0; ch < CH_COUNT; ch++)
        if (K.sock[ch]) zmq_close(K.sock[ch]);
    if (K.ctx) zmq_ctx_term(K.ctx); /* ends the heartbeat's recv with ETERM */
    if (hb_started) pthread_join(hb, NULL);
    for (int i = 0; i < K.nhistory; i++) free(K.history[i]);
    free(K.history);
    EVP_MAC_free(K.hmac);
    if (K.log != stderr) fclose(K.log);
    return ok ? 0 : 1;
}

/* The products' kept scratch (kernel_util.h): one buffer a thread, grown as needed and kept from
 * call to call. gemm.c and gemm_bf16.c share it: neither calls the other while it holds it. */
#include <stdlib.h>
#include <threads.h>

#include "ops/kernel_util.h"

enum { KEEP_BYTES = 4 << 20 };

static _Thread_local void *kept;
static _Thread_local size_t kept_bytes;
/* The same pointer under a key whose destructor frees it when its thread ends: OpenMP's pool
 * threads end when the team shrinks, and their scratch would leak (LeakSanitizer saw it). */
static tss_t kept_key;
static once_flag kept_once = ONCE_FLAG_INIT;
static int kept_key_ok;

static void kept_key_init(void) { kept_key_ok = tss_create(&kept_key, free) == thrd_success; }

static void *aligned(size_t bytes) { return aligned_alloc(64, (bytes ? bytes + 63 : 64) / 64 * 64); }

void *mlk_kept_scratch(size_t bytes) {
    if (bytes > KEEP_BYTES) return aligned(bytes);
    if (bytes > kept_bytes || !kept) {
        call_once(&kept_once, kept_key_init);
        void *p = aligned(bytes);
        if (!p || !kept_key_ok || tss_set(kept_key, p) != thrd_success) {
            free(p);
            return NULL;
        }
        free(kept);
        kept = p, kept_bytes = bytes;
    }
    return kept;
}

void mlk_kept_release(void *p) {
    if (p != kept) free(p);
}

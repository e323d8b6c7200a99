/* A backend fingerprint: everything besides the graph that decides what a compiled
 * executable is, as one string. It is half of an on-disk compile-cache key (the graph's
 * canonical hash is the other), so anything that can change generated code or the serialized
 * form must be in it: the backend's name and version, latch's version, the caller's
 * code-changing options, and the host's CPU architecture and vector features (a cache
 * directory may be shared by machines, and code built for AVX-512 must not be loaded where
 * there is none). Over-inclusion only costs a recompile; omission gives wrong hits. */
#ifndef RT_FINGERPRINT_H
#define RT_FINGERPRINT_H
#include <stddef.h>

#include "backend.h"

/* Bump with any release: entries written by another latch are never loaded. */
#define RT_LATCH_VERSION "0.1.0"

/* "backend=NAME/VERSION latch=V arch=A cpu=F1,F2 options=O" in out, NUL-terminated. options
 * may be NULL or "" when none. Returns the length it needed, like snprintf: a result >= size
 * means out was cut short and must not be used as a key. RT_FINGERPRINT_MAX is enough unless
 * options are long. */
#define RT_FINGERPRINT_MAX 512
size_t rt_fingerprint(const rt_backend *backend, const char *options, char *out, size_t size);

/* The host's vector features, comma-separated ("sse4.2,avx,avx2,fma"), "" where latch does
 * not know how to ask. */
const char *rt_cpu_features(void);

#endif

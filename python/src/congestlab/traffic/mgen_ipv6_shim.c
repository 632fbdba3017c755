/*
 * LD_PRELOAD shim for Debian's MGEN 5.02b on glibc >= 2.26.
 *
 * MGEN (protolib) decides whether the host is "IPv6 capable" by reading the
 * RES_USE_INET6 bit of the resolver state `_res` (a macro for `*__res_state()`).
 * glibc 2.26 dropped that option, so MGEN refuses IPv6 sockets ("system not IPv6
 * capable?"). This shim hands MGEN a resolver state with the bit set; MGEN only
 * reads the flag, and numeric addresses never reach the resolver.
 */
#include <resolv.h>

#ifndef RES_USE_INET6
#define RES_USE_INET6 0x00002000
#endif

static struct __res_state congestlab_res_state = {.options = RES_INIT | RES_USE_INET6};

struct __res_state *__res_state(void) { return &congestlab_res_state; }

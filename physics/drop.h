/* libterra-ode internal: what the two drop proofs (ode.c on the plane, ode_planet.c on a planet) share. */
#ifndef TERRA_PHYSICS_DROP_H
#define TERRA_PHYSICS_DROP_H

#include <stdint.h>

/* ODE category bits: ground blocks and the proofs' bodies */
#define GROUND_BITS 1ul
#define BODY_BITS 2ul

/* A uniform number in [0, 1) from a 64-bit linear congruential state. */
static inline double drop_rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

#endif

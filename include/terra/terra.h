/* terra: terrain too large to hold whole. Includes every module of the core library
 * (libc, libm and pthreads only). libterra-io (io.h, raster.h, archive_io.h), libterra-gl (gl.h)
 * and libterra-ode (ode.h) have headers of their own. */
/* Threads: each module's header says what may run concurrently. In short: set the allocator and log
 * hooks before any other thread uses terra; a source's callbacks are called from several threads at
 * once; an archive is shared freely once open; a streamer, a selection and a ground's updates belong
 * to one thread at a time; terra_last_error() is per thread. */
#ifndef TERRA_H
#define TERRA_H

#include "terra/core.h"
#include "terra/source.h"
#include "terra/grid.h"
#include "terra/select.h"
#include "terra/pool.h"
#include "terra/stream.h"
#include "terra/tile_mesh.h"
#include "terra/ground.h"
#include "terra/surface.h"
#include "terra/tin.h"
#include "terra/qmesh.h"
#include "terra/archive.h"
#include "terra/edit.h"
#include "terra/planet.h"

#endif

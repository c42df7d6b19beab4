/* terra: terrain too large to hold whole. Includes every module of the core library. */
#ifndef TERRA_H
#define TERRA_H

#include "terra/core.h"
#include "terra/source.h"
#include "terra/grid.h"
#include "terra/select.h"

#endif

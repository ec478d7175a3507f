/* SPDX-License-Identifier: MIT */
/* Node-side work of the turn (nodes.c). */
#pragma once

#include "controller-internal.h"

/* Asks the lease detector about every node; lost nodes go down with their ranks. */
void nodes_tick(Controller *ctl, int64_t now_ms);
/* Draining nodes with nothing left running become drained. */
void nodes_finish_drains(Controller *ctl);

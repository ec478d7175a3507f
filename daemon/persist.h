/* SPDX-License-Identifier: MIT */
/*
 * Mapping between the model and the store: what a turn marked dirty is written at its
 * end, and the model is rebuilt from the store at start-up.
 */
#pragma once

#include "model.h"
#include "store.h"
#include "transition.h"

/* Writes the turn's dirty jobs and nodes into the open transaction. 0 or -errno. */
int persist_dirty(Turn *t);
/* Loads every node and job into an empty model. 0 or -errno. */
int persist_load(Store *store, Model *m);

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
/* Loads every node and job into an empty model, but the jobs over before
 * retire_before_ms (wall) that hold nothing: those stay in the store. 0 or -errno. */
int persist_load(Store *store, Model *m, int64_t retire_before_ms);
/* A job as stored, for one that left memory (job_free it), or NULL. */
Job *persist_load_job(Store *store, int64_t id);
/* Adds to m the jobs first_id..last_id that are over, finished at or after since_ms and
 * not in m yet, with their attempts and ranks. How many, or -errno. */
int persist_load_ended(Store *store, Model *m, int64_t first_id, int64_t last_id, int64_t since_ms);

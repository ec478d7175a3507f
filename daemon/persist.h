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
/* Writes a dirty job's rows ahead of the turn's end, before a new attempt replaces its
 * ranks (what the turn changed in the old ones would go with them); it stays listed,
 * for what comes after. 0 or -errno. */
int persist_job_before_attempt(Turn *t, Job *job);
/* Loads every node, and every job not over or with a rank that may still run, into an
 * empty model: the others stay in the store (persist_load_ended). 0 or -errno. */
int persist_load(Store *store, Model *m);
/* A job as stored, for one that left memory (job_free it), or NULL. */
Job *persist_load_job(Store *store, int64_t id);
/* Adds to m the jobs first_id..last_id that are over, finished at or after since_ms and
 * not in m yet, with their attempts and ranks. How many, or -errno. */
int persist_load_ended(Store *store, Model *m, int64_t first_id, int64_t last_id, int64_t since_ms);

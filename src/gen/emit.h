/* emit.h - ckube-gen's output: the C header and source of a model
 * (docs/ckube-gen.md). The structs are described by tables for the codec
 * of ckube/typed.h; the functions per struct are one-line wrappers of it.
 *
 * The output depends on the model alone (no dates, no paths): the same
 * inputs generate the same bytes, so generated files can be checked in
 * or generated at build time alike. */
#ifndef CKUBE_GEN_EMIT_H
#define CKUBE_GEN_EMIT_H

#include <stdio.h>

#include "gen/model.h"

/* Writes the header (NAME.h) of m to f. 0, or -1 on a write error. */
int gen_emit_header(const gen_model *m, FILE *f);

/* Writes the source (NAME.c, which includes "NAME.h") of m to f. */
int gen_emit_source(const gen_model *m, FILE *f);

/* Writes DIR/NAME.h and DIR/NAME.c, each through a temporary file renamed
 * into place, so that a build never sees half a file. A file whose bytes
 * would not change is left alone (its time too: nothing recompiles).
 * 0, or -1 with *err (malloc'd). */
int gen_write(const gen_model *m, const char *dir, char **err);

#endif

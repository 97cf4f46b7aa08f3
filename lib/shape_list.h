/*
 * shape_list.h - internal: lists of input shapes "NAME=D1xD2x...[;NAME=...]", the value of the
 * context option "onnx_input_shapes" (shapes the ONNX importer gives symbolic graph inputs before it
 * folds shape arithmetic). A name is everything before the last '=' of its entry, so it may contain
 * '=' but not ';'. Dims are 1..2^31-1, at most PDC_MAX_RANK of them.
 */
#ifndef PDC_LIB_SHAPE_LIST_H
#define PDC_LIB_SHAPE_LIST_H

#include <stddef.h>
#include <stdint.h>

/* 1 if spec is a valid list ("" is valid and empty); else 0 and a message in err. */
int pdc_shape_list_valid(const char *spec, char *err, size_t cap);
/* 1 and the entry's rank and dims if spec has an entry for name (the last one wins). */
int pdc_shape_list_find(const char *spec, const char *name, int *rank, int64_t *dims);

#endif

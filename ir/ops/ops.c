/* ops.c - the op table from ops.def: names and arities. */
#include <string.h>

#include "ir/ir.h"

static const ir_op_info op_table[IR_OP_COUNT] = {
#define X(id, name, min_in, max_in, min_out, max_out) {name, min_in, max_in, min_out, max_out},
#include "ir/ops/ops.def"
#undef X
};

const ir_op_info *ir_op_get_info(ir_op op)
{
    return (unsigned)op < IR_OP_COUNT ? &op_table[op] : NULL;
}

int ir_op_from_name(const char *name, ir_op *op)
{
    for (int i = 0; i < IR_OP_COUNT; i++) {
        if (!strcmp(op_table[i].name, name)) {
            *op = (ir_op)i;
            return 1;
        }
    }
    return 0;
}

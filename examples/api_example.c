/* api_example.c - the README's C API example: build a model, compile it, run it. */
#include <pdc.h>
#include <stdio.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        if ((call) != PDC_OK) {                                                            \
            fprintf(stderr, "%s failed: %s\n", #call, pdc_context_last_error(ctx));        \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(void)
{
    pdc_context *ctx;
    if (pdc_context_create(&ctx) != PDC_OK) return 1;

    /* y = relu(conv3x3(x, w) + b), x: 1x1x4x4, two output channels, padding 1 */
    pdc_model *model;
    CHECK(pdc_model_create(ctx, "example", &model));
    const int64_t x_dims[] = {1, 1, 4, 4}, w_dims[] = {2, 1, 3, 3}, b_dims[] = {2};
    const float w[18] = {0, 0, 0, 0, 1, 0, 0, 0, 0,    /* channel 0: identity   */
                         0, 1, 0, 1, -4, 1, 0, 1, 0};  /* channel 1: Laplacian  */
    const float b[2] = {0.5f, 0.0f};
    CHECK(pdc_model_add_input(model, "x", 4, x_dims));
    CHECK(pdc_model_add_constant(model, "w", 4, w_dims, w));
    CHECK(pdc_model_add_constant(model, "b", 1, b_dims, b));

    pdc_attrs *attrs;
    CHECK(pdc_attrs_create(ctx, &attrs));
    const int64_t pads[] = {1, 1, 1, 1};
    CHECK(pdc_attrs_set_ints(attrs, "pads", 4, pads));
    const char *conv_in[] = {"x", "w", "b"}, *conv_out[] = {"c"};
    CHECK(pdc_model_add_layer(model, "conv", "conv", 3, conv_in, 1, conv_out, attrs));
    pdc_attrs_destroy(attrs);
    const char *relu_in[] = {"c"}, *relu_out[] = {"y"};
    CHECK(pdc_model_add_layer(model, "relu", "relu", 1, relu_in, 1, relu_out, NULL));
    CHECK(pdc_model_mark_output(model, "y"));

    /* Keep only the centre of channel 0's kernel and the cross of channel 1's: pattern sparsity. */
    const uint64_t patterns[] = {0x010, 0x0ba};  /* bit p = 3*row + col */
    const int32_t kernel_pattern[] = {0, 1};
    CHECK(pdc_model_set_sparsity_pattern(model, "w", 3, 3, 2, patterns, 2, kernel_pattern));

    pdc_program *program;
    CHECK(pdc_compile(ctx, model, "ref", &program));
    float x[16], y[32];
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 4);
    const int64_t y_dims[] = {1, 2, 4, 4};
    pdc_tensor *tx, *ty;
    CHECK(pdc_tensor_wrap(ctx, 4, x_dims, x, &tx));
    CHECK(pdc_tensor_wrap(ctx, 4, y_dims, y, &ty));
    CHECK(pdc_program_run(program, 1, &tx, 1, &ty));
    printf("channel 0, row 1: %g %g %g %g\n", y[4], y[5], y[6], y[7]);
    printf("channel 1, row 1: %g %g %g %g\n", y[20], y[21], y[22], y[23]);

    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(program);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return 0;
}

/* checkpoint_model.h - the model of fuzz_checkpoint.c's trainer and of its seed checkpoints
 * (make_checkpoint_seeds.c): a checkpoint loads only into a trainer of the same model. */
#ifndef PDC_TEST_FUZZ_CHECKPOINT_MODEL_H
#define PDC_TEST_FUZZ_CHECKPOINT_MODEL_H

static const char fuzz_checkpoint_model[] = "pdcir 1\n"
                                            "model \"ckpt\"\n"
                                            "input x : f32[1,1,4,4]\n"
                                            "const w1 : f32[2,1,3,3] = dense<elided>\n"
                                            "const b1 : f32[2] = dense<elided>\n"
                                            "const fw : f32[3,32] = dense<elided>\n"
                                            "const fb : f32[3] = dense<elided>\n"
                                            "layer conv = conv(x, w1, b1) -> (c) {pads=[1, 1, 1, 1]}\n"
                                            "layer relu = relu(c) -> (r)\n"
                                            "layer flat = flatten(r) -> (f)\n"
                                            "layer fc = fc(f, fw, fb) -> (y)\n"
                                            "layer softmax = softmax(y) -> (p)\n"
                                            "output p\n";

#endif

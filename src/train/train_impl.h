/* train_impl.h -- what the files of src/train share and no program sees (never installed). */
#ifndef AG_TRAIN_IMPL_H
#define AG_TRAIN_IMPL_H

/* The program's name (ag_train_name): "char_lm", or "attograd" until one is given. */
const char *ag__train_program(void);
/* getenv("<env>_<suffix>"): $CHAR_LM_PLOT_TIMEOUT for suffix "PLOT_TIMEOUT" in char_lm. */
const char *ag__train_getenv(const char *suffix);

#endif

/* train/cmd.h — (being written) */
#ifndef LT_TRAIN_CMD_H
#define LT_TRAIN_CMD_H
#endif

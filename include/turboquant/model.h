/* turboquant/model.h -- included by turboquant.h only. */
#ifndef TURBOQUANT_MODEL_H
#define TURBOQUANT_MODEL_H
#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif

/* turboquant/io.h -- included by turboquant.h only. */
#ifndef TURBOQUANT_IO_H
#define TURBOQUANT_IO_H
#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif

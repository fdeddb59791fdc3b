/* clock.h - the project's one monotonic clock.
 *
 * Deadlines, queue delays, busy ratios and latency histograms are all
 * differences of st_now_ms() readings, so they never jump with the wall
 * clock (NTP steps, suspend). Wall-clock time (Unix seconds in responses,
 * pthread_cond_timedwait's CLOCK_REALTIME deadlines) stays with its users.
 */
#ifndef ST_CLOCK_H
#define ST_CLOCK_H

/* st_now_ms - CLOCK_MONOTONIC in milliseconds (fractional, ns resolution),
 * from an arbitrary origin: only differences mean anything. Any thread;
 * never fails. */
double st_now_ms(void);

#endif /* ST_CLOCK_H */

/*
 * Probes for myapp. Nothing declared yet.
 */
#pragma D option quiet
typedef unsigned int uint_t;

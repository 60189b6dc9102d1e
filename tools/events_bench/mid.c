/* mid.c -- libeventsmid.so: the "MPI library" between startup.c and the
 * core library, so that the core library is a dependency of a dependency. */
int eventscore_touch(void);
int eventsmid_touch(void);
int eventsmid_touch(void) { return eventscore_touch(); }

/* core.c -- libeventscore.so: libpinheap.a linked whole, as a runtime's
 * core library links it. */
int eventscore_touch(void);
int eventscore_touch(void) { return 1; }

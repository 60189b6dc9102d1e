/*
 * startup.c -- a trivial program for the start-up cost of installation: it
 * links only libeventsmid.so, which needs libeventscore.so (libpinheap.a
 * whole): the core library is behind libc in symbol lookup, so installation
 * patches relocations before main.  Prints pinheap's installation text
 * (which states how long installation took), found with dlsym.
 */
#include <dlfcn.h>
#include <stdio.h>

#define STR_(x) #x
#define STR(x) STR_(x)

int eventsmid_touch(void);

int main(void)
{
  const char *(*text)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, STR(PINHEAP_PREFIX) "install_text");
  if (text == NULL)
    return 2;
  puts(text());
  return eventsmid_touch() == 1 ? 0 : 1;
}

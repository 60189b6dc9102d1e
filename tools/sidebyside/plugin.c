/* plugin.c -- libsbsplugin.so, the library the dlclose scenario of
 * scenarios.c loads and unloads: some code and 1 MiB of data to unmap. */
char sbs_plugin_data[1 << 20] = { 1 };

int sbs_plugin_touch(void)
{
  return sbs_plugin_data[0];
}

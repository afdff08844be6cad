// An ordinary shared library: no tessel symbols at all.
extern "C" int not_a_plugin_answer() { return 42; }

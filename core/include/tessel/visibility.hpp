// What the core and its plugins share across library boundaries must be
// visible whatever -fvisibility a plugin is built with: the classes whose
// type_info has to be one (stage interfaces, the exceptions a plugin throws)
// and the records and functions the loader looks up in a plugin's file.
#pragma once

#define TESSEL_VISIBLE __attribute__((visibility("default")))

// A test of the lower layer reaching up, which the allow-list does not name.
#include "high/top.h"

// A lower layer reaching up: what check_includes.py must refuse.
#pragma once

#include "high/top.h"

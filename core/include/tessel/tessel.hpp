// Everything a plugin author needs: include this one header.
#pragma once

#include "tessel/cluster.hpp"
#include "tessel/goodput.hpp"
#include "tessel/ids.hpp"
#include "tessel/job.hpp"
#include "tessel/lab.hpp"
#include "tessel/parallelism.hpp"
#include "tessel/plugin.hpp"
#include "tessel/reason.hpp"
#include "tessel/rng.hpp"
#include "tessel/slots.hpp"
#include "tessel/stages.hpp"
#include "tessel/throughput.hpp"
#include "tessel/view.hpp"

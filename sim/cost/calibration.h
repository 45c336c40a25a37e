/* The calibrations the device specs carry (device_spec.c): kernel efficiencies fitted to the real
 * build's measured kernel times by lab/fit_cost_model.py, which writes each as a C table
 * (calibration_<device>.c). A table in the build rather than a file read at run time: the twin
 * stays self-contained and deterministic (the same prediction on every machine and in CI, nothing
 * to find or to go stale beside the binary), and a new fit is a reviewed diff with its provenance. */
#ifndef TWINRUN_SIM_COST_CALIBRATION_H
#define TWINRUN_SIM_COST_CALIBRATION_H

#include "twin_cost.h"

extern const twin_calibration twin_calibration_h200;
extern const twin_calibration twin_calibration_h100;

#endif

#pragma once
/// Fits of measured calibration tables (CPU, Eigen least squares).

//===- Solver.cpp - 0-1 integer programs, solved by CBC -------------------===//

#include "Solver.h"

#include <coin/CbcModel.hpp>
#include <coin/CbcSolver.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

using namespace tessera::autosharding;

/// A bound as CBC reads it: its infinity where the program has none.
static double getBound(double bound) {
  return std::clamp(bound, -COIN_DBL_MAX, COIN_DBL_MAX);
}

/// Fails naming the first cost or constraint coefficient of `program` that
/// is not finite.
static llvm::Error checkFinite(const IntegerProgram &program) {
  for (auto [column, cost] : llvm::enumerate(program.objective))
    if (!std::isfinite(cost))
      return llvm::createStringError(llvm::formatv(
          "the cost of variable {0} is not a finite number", column));
  for (auto [index, row] : llvm::enumerate(program.rows))
    if (!llvm::all_of(row.values,
                      [](double value) { return std::isfinite(value); }))
      return llvm::createStringError(llvm::formatv(
          "a coefficient of constraint {0} is not a finite number", index));
  return llvm::Error::success();
}

/// `objective` scaled so that its largest coefficient is at most
/// kLargestObjectiveCoefficient.
static std::vector<double> getScaledObjective(std::vector<double> objective) {
  double largest = 0;
  for (double cost : objective)
    largest = std::max(largest, std::abs(cost));
  if (largest <= kLargestObjectiveCoefficient)
    return objective;
  double scale = kLargestObjectiveCoefficient / largest;
  for (double &cost : objective)
    cost *= scale;
  return objective;
}

llvm::Expected<IntegerSolution>
tessera::autosharding::solveIntegerProgram(const IntegerProgram &program,
                                           int seconds) {
  if (llvm::Error error = checkFinite(program))
    return std::move(error);
  size_t numColumns = program.objective.size();
  std::vector<double> objective = getScaledObjective(program.objective);
  std::vector<double> colLower(numColumns, 0), colUpper(numColumns, 1);
  std::vector<double> rowLower, rowUpper;
  CoinPackedMatrix matrix(false, 0, 0);
  for (const IntegerProgram::Row &row : program.rows) {
    matrix.appendRow(CoinPackedVector(static_cast<int>(row.columns.size()),
                                      row.columns.data(), row.values.data()));
    rowLower.push_back(getBound(row.lower));
    rowUpper.push_back(getBound(row.upper));
  }
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, colLower.data(), colUpper.data(), objective.data(),
                     rowLower.data(), rowUpper.data());
  for (size_t column = 0; column < numColumns; ++column)
    if (program.isInteger[column])
      solver.setInteger(static_cast<int>(column));
  // CBC as its command line runs it: presolve, cuts and heuristics, which a
  // bare branch and bound lacks.
  CbcModel model(solver);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  std::string limit = std::to_string(seconds);
  const char *arguments[] = {"tessera",     "-log",   "0",    "-sec",
                             limit.c_str(), "-solve", "-quit"};
  CbcMain1(
      std::size(arguments), arguments, model, [](CbcModel *, int) { return 0; },
      data);
  IntegerSolution solution;
  if (const double *values = model.bestSolution())
    solution.values.assign(values, values + numColumns);
  solution.optimal = model.isProvenOptimal();
  solution.infeasible = model.isProvenInfeasible();
  return solution;
}

//===- Solver.h - 0-1 integer programs, solved by CBC -----------*- C++ -*-===//
//
// The auto-sharding ILP's program as plain arrays, and its solution by
// COIN-OR CBC: the one file of lib/Search that includes the solver.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_SEARCH_AUTOSHARDING_SOLVER_H
#define TESSERA_LIB_SEARCH_AUTOSHARDING_SOLVER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <limits>
#include <vector>

namespace tessera::autosharding {

/// Minimize objective · x over columns x in [0, 1], the integer ones 0 or
/// 1, subject to lower <= row · x <= upper for each row.
struct IntegerProgram {
  static constexpr double kUnbounded = std::numeric_limits<double>::max();

  struct Row {
    std::vector<int> columns;
    std::vector<double> values;
    double lower, upper;
  };
  std::vector<double> objective;
  std::vector<bool> isInteger;
  std::vector<Row> rows;

  /// Adds a column of cost `cost`; returns its index.
  int addColumn(double cost, bool integer) {
    objective.push_back(cost);
    isInteger.push_back(integer);
    return static_cast<int>(objective.size() - 1);
  }
  void addRow(llvm::ArrayRef<int> columns, llvm::ArrayRef<double> values,
              double lower, double upper) {
    rows.push_back({columns.vec(), values.vec(), lower, upper});
  }
};

struct IntegerSolution {
  /// Each column's value; empty when no solution was found.
  std::vector<double> values;
  /// Proven optimal, or proven to have no solution.
  bool optimal = false, infeasible = false;
};

/// The largest objective coefficient CBC is handed. Clp asserts that each
/// is below 1e25 (ClpSimplex::createRim), and stops solving reliably well
/// before: CBC 2.10 called an MLP's sharding program infeasible once its
/// costs reached about 1e14 and solved it at 1e13. A larger objective is
/// scaled down to this, which moves no optimum; one below it is handed
/// over as it is.
inline constexpr double kLargestObjectiveCoefficient = 1e12;

/// Solves `program` as CBC's command line does (presolve, cuts and
/// heuristics), for at most `seconds`, its objective scaled down where it
/// exceeds kLargestObjectiveCoefficient. Fails on a cost or coefficient
/// that is not finite, which CBC would take for its infinity.
llvm::Expected<IntegerSolution>
solveIntegerProgram(const IntegerProgram &program, int seconds);

} // namespace tessera::autosharding

#endif // TESSERA_LIB_SEARCH_AUTOSHARDING_SOLVER_H

//===- FactorPropagation.h - Settling the axes of a factor ------*- C++ -*-===//
//
// The conflict strategies of sharding propagation: given what each tensor of
// an op wants for one factor, which axes the factor keeps. They are pure
// functions of the candidates, so that they can be tested without a pass.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_FACTORPROPAGATION_H
#define TESSERA_ANALYSIS_FACTORPROPAGATION_H

#include "tessera/Analysis/MachineModel.h"
#include "tessera/Analysis/Sharding.h"

#include <string>

namespace tessera {

/// What one tensor of an op wants for one factor: the axes its sharding
/// projects onto that factor.
struct FactorCandidate {
  /// The tensor among the op's operands, then results.
  int64_t tensor;
  AxisList axes;
  /// The tensor's global size: what resharding it moves.
  int64_t bytes;
};

/// The axes a factor keeps, and whose they were.
struct FactorResolution {
  AxisList axes;
  /// The tensor (as FactorCandidate::tensor) whose axes were kept; -1 when
  /// none was (no candidates, or nothing in common).
  int64_t winner = -1;
  /// True when the candidates disagreed (not all prefixes of the longest),
  /// so that some tensor will be resharded.
  bool isConflict = false;
};

/// A strategy for the axes of one factor of one op. Candidates that agree
/// (each a prefix of the longest) always give the longest, whatever the
/// strategy: only conflicts are the strategy's to settle.
class FactorPropagation {
public:
  virtual ~FactorPropagation();

  /// The axes the factor keeps given `candidates`, in operand-then-result
  /// order (ties go to the earlier one).
  FactorResolution resolve(llvm::ArrayRef<FactorCandidate> candidates) const;

  /// Why the strategy keeps what it keeps, for explanations
  /// ("fewest bytes to reshard").
  virtual std::string getReason() const = 0;

protected:
  /// Settles candidates that are not all prefixes of one another.
  virtual FactorResolution
  resolveConflict(llvm::ArrayRef<FactorCandidate> candidates) const = 0;
};

/// Keeps only the candidates' common prefix, so that no tensor gains an axis
/// another tensor of the factor disagrees with.
class ConservativeFactorPropagation : public FactorPropagation {
public:
  std::string getReason() const override;

protected:
  FactorResolution
  resolveConflict(llvm::ArrayRef<FactorCandidate> candidates) const override;
};

/// Keeps the whole of the candidate cheapest to reshard to: the sum of the
/// costs of the candidates incompatible with it. Ties go to more axes, then
/// to the earlier candidate. By default the cost is the loser's bytes.
class AggressiveFactorPropagation : public FactorPropagation {
public:
  std::string getReason() const override;

  /// The cost of resharding `loser` so that its factor holds `kept`.
  virtual double getReshardCost(const FactorCandidate &loser,
                                llvm::ArrayRef<mlir::StringAttr> kept) const;

protected:
  FactorResolution
  resolveConflict(llvm::ArrayRef<FactorCandidate> candidates) const override;
};

/// Aggressive, priced in seconds on a machine: the loser is all-gathered
/// over its axes that the kept candidate lacks, on the links those axes
/// cross, so that gathering over a fast axis beats gathering over a slow one
/// of the same size.
class MachineFactorPropagation : public AggressiveFactorPropagation {
public:
  MachineFactorPropagation(const MeshShape &mesh, const MachineModel &machine)
      : mesh(mesh), machine(machine) {}

  std::string getReason() const override;
  double getReshardCost(const FactorCandidate &loser,
                        llvm::ArrayRef<mlir::StringAttr> kept) const override;

private:
  const MeshShape &mesh;
  const MachineModel &machine;
};

/// An axis that two factors of one op chose, settled: `keeper` keeps it and
/// `loser` gives it up, with the axes after it.
struct AxisClaimLoss {
  mlir::StringAttr axis;
  int64_t keeper;
  int64_t loser;
};

/// An axis splits at most one factor of an op. When several factors of
/// `chosen` hold one, the factor whose tensors already hold the most bytes
/// split over it keeps it (the others' tensors are the ones to reshard); ties
/// go to the first factor. `projected` is each tensor's view of each factor
/// and `tensorBytes` each tensor's size. Truncates the losers in `chosen`
/// and returns the losses in the order they were settled.
llvm::SmallVector<AxisClaimLoss>
resolveAxisClaims(FactorAxes &chosen, llvm::ArrayRef<FactorAxes> projected,
                  llvm::ArrayRef<int64_t> tensorBytes);

} // namespace tessera

#endif // TESSERA_ANALYSIS_FACTORPROPAGATION_H

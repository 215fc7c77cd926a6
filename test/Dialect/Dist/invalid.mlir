// RUN: tessera-opt %s -split-input-file -verify-diagnostics

// Tests that a mesh axis may not appear twice.
// expected-error @+1 {{'dist.mesh' op has axis "dp" twice}}
dist.mesh @mesh ["dp"=2, "dp"=4]

// -----

// Tests that a mesh's device count is bounded (it overflowed int64 before).
// expected-error @+1 {{'dist.mesh' op has more than 1048576 devices (2^20), the most a plan runs on}}
dist.mesh @huge ["dp"=4294967296, "tp"=4294967296]

// -----

// Tests that the device count leaves out the microbatch axis "mb" but still
// bounds the axes of devices beside it.
// expected-error @+1 {{'dist.mesh' op has more than 1048576 devices (2^20), the most a plan runs on}}
dist.mesh @mesh_dp_2048_tp_1024_mb_2 ["dp"=2048, "tp"=1024, "mb"=2]

// -----

// Tests that the microbatch axis is bounded on its own, so that no product
// of axis sizes overflows int64.
// expected-error @+1 {{'dist.mesh' op axis "mb" has 4294967296 microbatches, more than 1048576 (2^20), the most a step runs}}
dist.mesh @mesh_dp_2_mb_4294967296 ["dp"=2, "mb"=4294967296]

// -----

// Tests that mesh axes have a size of at least one.
// expected-error @+1 {{axis "tp" has size 0, expected at least 1}}
dist.mesh @mesh ["tp"=0]

// -----

// Tests that mesh axes have names.
// expected-error @+1 {{has an axis with an empty name}}
dist.mesh @mesh [""=2]

// -----

// Tests that a sharding names an existing mesh.
// expected-error @+1 {{invalid sharding of argument #0: unknown mesh @nowhere}}
func.func @unknown_mesh(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@nowhere, [{}]>}) {
  return
}

// -----

// Tests that a sharding only names axes of its mesh.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{invalid sharding of argument #0: mesh @mesh has no axis "tp"}}
func.func @unknown_axis(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>}) {
  return
}

// -----

// Tests that a sharding has one entry per tensor dimension.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{invalid sharding of result #0: sharding has 1 dims but the tensor has rank 2}}
func.func @rank_mismatch(%x: tensor<8x8xf32>) -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}) {
  return %x : tensor<8x8xf32>
}

// -----

// Tests that an axis appears at most once across the dims of a sharding.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{mesh axis "dp" appears twice in the sharding}}
func.func @axis_twice(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"dp"}]>}) {
  return
}

// -----

// Tests that an axis may not be both split and unreduced.
dist.mesh @mesh ["dp"=2, "tp"=2]
// expected-error @+1 {{mesh axis "tp" appears twice in the sharding}}
func.func @split_and_unreduced(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], unreduced={"tp"}>}) {
  return
}

// -----

// Tests that only replicated, unreduced and flat follow the dims.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{expected 'replicated', 'unreduced' or 'flat', got 'partial'}}
func.func @bad_field(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{}], partial={"dp"}>}) {
  return
}

// -----

// Tests that a flat piece holds no pending sums.
dist.mesh @mesh ["dp"=2, "tp"=2]
// expected-error @+1 {{a flat sharding cannot be unreduced}}
func.func @flat_unreduced(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{}], unreduced={"tp"}, flat={"dp"}>}) {
  return
}

// -----

// Tests that a flat axis does not also split a dim.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{mesh axis "dp" appears twice in the sharding}}
func.func @flat_and_split(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}], flat={"dp"}>}) {
  return
}

// -----

// Tests that a global shape is an array of sizes.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{expects 'dist.global_shape' of argument #0 to be an array of sizes, got [5, 6]}}
func.func @bad_global_shape(%x: tensor<8xf32> {dist.global_shape = [5, 6]}) {
  return
}

// -----

// Tests that a field of the sharding is given once.
dist.mesh @mesh ["dp"=2, "tp"=2]
// expected-error @+1 {{field 'replicated' given twice}}
func.func @field_twice(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{}], replicated={"dp"}, replicated={"tp"}>}) {
  return
}

// -----

// Tests that a priority is p followed by a number.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{expected a priority 'p<N>' with N >= 0}}
func.func @bad_priority(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}q1]>}) {
  return
}

// -----

// Tests that only tensors can be sharded.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{invalid sharding of argument #0: expects a ranked tensor to shard, got 'i32'}}
func.func @not_a_tensor(%x: i32 {dist.sharding = #dist.sharding<@mesh, []>}) {
  return
}

// -----

// Tests that dist.sharding holds a sharding.
// expected-error @+1 {{expects 'dist.sharding' of argument #0 to be a #dist.sharding, got 1 : i64}}
func.func @not_a_sharding(%x: tensor<8xf32> {dist.sharding = 1}) {
  return
}

// -----

// Tests that unknown dist attributes are rejected.
// expected-error @+1 {{unknown dist attribute 'dist.shard' on argument #0}}
func.func @unknown_attribute(%x: tensor<8xf32> {dist.shard = 1}) {
  return
}

// -----

// Tests that an op's shardings come one per result.
dist.mesh @mesh ["dp"=2]
func.func @sharding_count(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects one sharding per result (1), got 2}}
  %r = nn.relu %x {dist.sharding = [#dist.sharding<@mesh, [{}]>, #dist.sharding<@mesh, [{}]>]} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that an op's sharding fits its result.
dist.mesh @mesh ["dp"=2]
func.func @op_sharding_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{invalid sharding of result #0: sharding has 2 dims but the tensor has rank 1}}
  %r = nn.relu %x {dist.sharding = #dist.sharding<@mesh, [{}, {}]>} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that a sharding constraint checks its mesh.
func.func @constraint_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.sharding_constraint' op names unknown mesh @nowhere}}
  %c = dist.sharding_constraint %x <@nowhere, [{}]> : tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// Tests that a sharding constraint checks its rank.
dist.mesh @mesh ["dp"=2]
func.func @constraint_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.sharding_constraint' op sharding has 2 dims but the tensor has rank 1}}
  %c = dist.sharding_constraint %x <@mesh, [{}, {}]> : tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// Tests that a collective names an existing mesh.
func.func @collective_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.all_reduce' op names unknown mesh @nowhere}}
  %r = dist.all_reduce %x on @nowhere ["tp"] sum : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that a collective's axes belong to its mesh.
dist.mesh @mesh ["dp"=2]
func.func @collective_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.all_reduce' op mesh @mesh has no axis "tp"}}
  %r = dist.all_reduce %x on @mesh ["tp"] sum : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that a collective names an axis once.
dist.mesh @mesh ["dp"=2]
func.func @collective_axis_twice(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{names mesh axis "dp" twice}}
  %r = dist.all_reduce %x on @mesh ["dp", "dp"] sum : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that a collective runs over at least one axis.
dist.mesh @mesh ["dp"=2]
func.func @collective_no_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects at least one mesh axis}}
  %r = dist.all_reduce %x on @mesh [] sum : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that all_gather multiplies its dim by the group size.
dist.mesh @mesh ["dp"=2, "tp"=4]
func.func @all_gather_shape(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'dist.all_gather' op expects a result of shape [8, 64] for group size 4, got [8, 32]}}
  %g = dist.all_gather %x on @mesh ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x32xf32>
  return %g : tensor<8x32xf32>
}

// -----

// Tests that the group of several axes is their product.
dist.mesh @mesh ["dp"=2, "tp"=4]
func.func @all_gather_two_axes(%x: tensor<8x16xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{expects a result of shape [8, 128] for group size 8, got [8, 64]}}
  %g = dist.all_gather %x on @mesh ["dp", "tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  return %g : tensor<8x64xf32>
}

// -----

// Tests that a collective's dim is in range.
dist.mesh @mesh ["tp"=4]
func.func @all_gather_dim(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_gather' op dim 2 is out of range for rank 2}}
  %g = dist.all_gather %x on @mesh ["tp"] dim = 2 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}

// -----

// Tests that collectives keep the element type.
dist.mesh @mesh ["tp"=4]
func.func @all_gather_element(%x: tensor<8x16xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{expects the result element type 'f32', got 'bf16'}}
  %g = dist.all_gather %x on @mesh ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xbf16>
  return %g : tensor<8x64xbf16>
}

// -----

// Tests that collectives keep the rank.
dist.mesh @mesh ["tp"=4]
func.func @all_gather_rank(%x: tensor<8x16xf32>) -> tensor<512xf32> {
  // expected-error @+1 {{expects a result of rank 2, got 1}}
  %g = dist.all_gather %x on @mesh ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<512xf32>
  return %g : tensor<512xf32>
}

// -----

// Tests that reduce_scatter needs a dim that the group divides.
dist.mesh @mesh ["tp"=4]
func.func @reduce_scatter_divisible(%x: tensor<6x16xf32>) -> tensor<1x16xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op dim 0 of size 6 is not divisible by the group size 4}}
  %s = dist.reduce_scatter %x on @mesh ["tp"] dim = 0 sum : tensor<6x16xf32> -> tensor<1x16xf32>
  return %s : tensor<1x16xf32>
}

// -----

// Tests that reduce_scatter divides its dim by the group size.
dist.mesh @mesh ["tp"=4]
func.func @reduce_scatter_shape(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{expects a result of shape [2, 16] for group size 4, got [4, 16]}}
  %s = dist.reduce_scatter %x on @mesh ["tp"] dim = 0 sum : tensor<8x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// Tests that all_to_all splits one dim and concatenates another.
dist.mesh @mesh ["tp"=4]
func.func @all_to_all_shape(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_to_all' op expects a result of shape [2, 64] for group size 4, got [8, 16]}}
  %t = dist.all_to_all %x on @mesh ["tp"] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// Tests that all_to_all's dims are in range.
dist.mesh @mesh ["tp"=4]
func.func @all_to_all_dim(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %t = dist.all_to_all %x on @mesh ["tp"] split_dim = 0 concat_dim = -1 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// Tests that all_slice needs a dim that the group divides.
dist.mesh @mesh ["tp"=4]
func.func @all_slice_divisible(%x: tensor<8x10xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'dist.all_slice' op dim 1 of size 10 is not divisible by the group size 4}}
  %s = dist.all_slice %x on @mesh ["tp"] dim = 1 : tensor<8x10xf32> -> tensor<8x2xf32>
  return %s : tensor<8x2xf32>
}

// -----

// Tests that collective_permute takes pairs.
dist.mesh @mesh ["pp"=4]
func.func @permute_odd(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects (source, target) pairs, got 3 indices}}
  %p = dist.collective_permute %x on @mesh ["pp"] pairs = [0, 1, 2] : tensor<8xf32>
  return %p : tensor<8xf32>
}

// -----

// Tests that collective_permute indices are in the group.
dist.mesh @mesh ["pp"=4]
func.func @permute_range(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{index 4 is out of range for group size 4}}
  %p = dist.collective_permute %x on @mesh ["pp"] pairs = [3, 4] : tensor<8xf32>
  return %p : tensor<8xf32>
}

// -----

// Tests that a device is a source at most once.
dist.mesh @mesh ["pp"=4]
func.func @permute_source(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{device 0 is a source twice}}
  %p = dist.collective_permute %x on @mesh ["pp"] pairs = [0, 1, 0, 2] : tensor<8xf32>
  return %p : tensor<8xf32>
}

// -----

// Tests that a device is a target at most once.
dist.mesh @mesh ["pp"=4]
func.func @permute_target(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{device 1 is a target twice}}
  %p = dist.collective_permute %x on @mesh ["pp"] pairs = [0, 1, 2, 1] : tensor<8xf32>
  return %p : tensor<8xf32>
}

// -----

// Tests that a broadcast root is in the group.
dist.mesh @mesh ["dp"=2]
func.func @broadcast_root(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.broadcast' op root 2 is out of range for group size 2}}
  %b = dist.broadcast %x on @mesh ["dp"] root = 2 : tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

// Tests that a mesh in generic form has one size per axis name.
// expected-error @+1 {{'dist.mesh' op has 2 axis names but 1 sizes}}
"dist.mesh"() {sym_name = "mesh", axis_names = ["dp", "tp"], shape = array<i64: 2>} : () -> ()

// -----

// Tests that an op's dist.sharding holds shardings.
func.func @op_sharding_kind(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects 'dist.sharding' to be a #dist.sharding or an array of them, got "dp"}}
  %r = nn.relu %x {dist.sharding = "dp"} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that an op's array of shardings holds only shardings.
func.func @op_sharding_element(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects 'dist.sharding' to hold #dist.sharding, got 1 : i64}}
  %r = nn.relu %x {dist.sharding = [1]} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that unknown dist attributes on ops are rejected.
func.func @op_unknown_attribute(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{unknown dist attribute 'dist.phase'}}
  %r = nn.relu %x {dist.phase = 1} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that dist.wait completes only a collective or send started on a stream.
dist.mesh @mesh ["dp"=4]
func.func @wait_of_blocking(%w: tensor<2x8xf32>) -> tensor<8x8xf32> {
  %g = dist.all_gather %w on @mesh ["dp"] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  // expected-error @+1 {{'dist.wait' op expects the result of a collective or send started on a stream ('dist.stream')}}
  %full = dist.wait %g : tensor<8x8xf32>
  return %full : tensor<8x8xf32>
}

// -----

// Tests that a started collective is read only through its wait.
dist.mesh @mesh ["dp"=4]
func.func @read_before_wait(%w: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{a collective started on a stream must have one use, the dist.wait that completes it}}
  %g = dist.all_gather %w on @mesh ["dp"] dim = 0 {dist.stream = 1 : i64} : tensor<2x8xf32> -> tensor<8x8xf32>
  %r = nn.relu %g : tensor<8x8xf32>
  %full = dist.wait %g : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Tests that stream 0 (compute) and non-collectives cannot be started.
dist.mesh @mesh ["dp"=4]
func.func @stream_zero(%w: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{expects 'dist.stream' to be a stream number of 1 or more (0 is the compute stream), got 0 : i64}}
  %g = dist.all_gather %w on @mesh ["dp"] dim = 0 {dist.stream = 0 : i64} : tensor<2x8xf32> -> tensor<8x8xf32>
  %full = dist.wait %g : tensor<8x8xf32>
  return %full : tensor<8x8xf32>
}

// -----

func.func @stream_on_kernel(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.stream' is only allowed on collectives and sends}}
  %r = nn.relu %x {dist.stream = 1 : i64} : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that a transfer names an axis of its mesh, a coordinate on it and a
// tag of 0 or more.
dist.mesh @mesh ["pp"=2]
func.func @transfer_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.send' op mesh @mesh has no axis "stage"}}
  %s = dist.send %x on @mesh "stage" to 1 tag 0 : tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

dist.mesh @mesh ["pp"=2]
func.func @transfer_peer() -> tensor<8xf32> {
  // expected-error @+1 {{'dist.recv' op peer 2 is not a coordinate of axis "pp" (size 2)}}
  %r = dist.recv on @mesh "pp" from 2 tag 0 : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

dist.mesh @mesh ["pp"=2]
func.func @transfer_tag() -> tensor<8xf32> {
  // expected-error @+1 {{'dist.recv' op expects a tag of 0 or more, got -1}}
  %r = dist.recv on @mesh "pp" from 1 tag -1 : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @transfer_mesh() -> tensor<8xf32> {
  // expected-error @+1 {{'dist.recv' op names unknown mesh @nowhere}}
  %r = dist.recv on @nowhere "pp" from 1 tag 0 : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests the stage attributes: stages and pipeline ranks are 0 or more, a
// pipeline rank belongs to a function and a source index to an argument.
func.func @negative_stage(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects 'dist.stage' to be an integer of 0 or more, got -1 : i64}}
  %y = nn.relu %x {dist.stage = -1 : i64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @rank_on_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.pipeline_rank' is only allowed on functions}}
  %y = nn.relu %x {dist.pipeline_rank = 0 : i64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// expected-error @+1 {{expects 'dist.source_index' of argument #0 to be an index of 0 or more, got "a"}}
func.func @source_index(%x: tensor<8xf32> {dist.source_index = "a"}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// Tests that a unit's flat buffer lists its members, each by name, shape
// and index in the step.
// expected-error @+1 {{expects 'dist.members' of argument #0 to be a list of {name, shape, source[, dim]}, got [{name = "w", shape = array<i64: 8>}]}}
func.func @members(%x: tensor<8xf32> {dist.members = [{name = "w", shape = array<i64: 8>}]}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// Tests that a unit's flat buffer is 1-d, or 2-d (a row per device).
// expected-error @+1 {{expects result #0 with 'dist.members' to be a 1-d or 2-d tensor, got 'tensor<2x2x2xf32>'}}
func.func @members_rank(%x: tensor<2x2x2xf32>) -> (tensor<2x2x2xf32> {dist.members = [{name = "w", shape = array<i64: 8>, source = 0 : i64}]}) {
  return %x : tensor<2x2x2xf32>
}

// -----

// Tests that a schedule names all its parts.
// expected-error @+1 {{expects 'dist.schedule' on a function, a dictionary of microbatches, units, unit_stages, entries and send_waits}}
func.func @schedule(%x: tensor<8xf32>) -> tensor<8xf32> attributes {dist.schedule = {microbatches = 2 : i64}} {
  return %x : tensor<8xf32>
}

// -----

dist.mesh @mesh ["pp"=2]
// Tests that a send outside a schedule's units is waited for.
func.func @unwaited_send(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{a collective started on a stream must have one use, the dist.wait that completes it}}
  %s = dist.send %x on @mesh "pp" to 1 tag 0 {dist.stream = 1 : i64} : tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

// Tests that a microbatch slice splits dim 0 evenly.
func.func @microbatch_slice(%x: tensor<6x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{expects a batch whose dim 0 splits into 4 microbatches}}
  %y = dist.microbatch_slice %x of 4 : tensor<6x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @microbatch_slice_shape(%x: tensor<8x4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{expects a result of 4th of dim 0 of the input, got 'tensor<2x2xf32>'}}
  %y = dist.microbatch_slice %x of 4 : tensor<8x4xf32> -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// Tests that axis_index names axes of its mesh.
dist.mesh @mesh ["dp"=2]
func.func @axis_index_axis() -> tensor<1xi64> {
  // expected-error @+1 {{'dist.axis_index' op mesh @mesh has no axis "tp"}}
  %i = dist.axis_index @mesh [["tp"]] : tensor<1xi64>
  return %i : tensor<1xi64>
}

// -----

// Tests that axis_index gives one element per group.
dist.mesh @mesh ["dp"=2]
func.func @axis_index_size() -> tensor<2xi64> {
  // expected-error @+1 {{'dist.axis_index' op expects a result of one element per group, got 2 for 1 groups}}
  %i = dist.axis_index @mesh [["dp"]] : tensor<2xi64>
  return %i : tensor<2xi64>
}

// -----

// Tests that a group names an axis once.
dist.mesh @mesh ["dp"=2]
func.func @axis_index_twice() -> tensor<1xi64> {
  // expected-error @+1 {{'dist.axis_index' op names mesh axis "dp" twice in group 0}}
  %i = dist.axis_index @mesh [["dp", "dp"]] : tensor<1xi64>
  return %i : tensor<1xi64>
}

// -----

func.func @partitioned_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.partitioned' is a unit attribute of functions}}
  %y = nn.relu %x {dist.partitioned} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// expected-error @+1 {{'dist.partitioned' is a unit attribute of functions}}
func.func @partitioned_value(%x: tensor<8xf32>) -> tensor<8xf32> attributes {dist.partitioned = 1 : i64} {
  return %x : tensor<8xf32>
}

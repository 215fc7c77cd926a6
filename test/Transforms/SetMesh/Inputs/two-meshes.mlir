dist.mesh @a ["dp"=1]
dist.mesh @b ["dp"=1]

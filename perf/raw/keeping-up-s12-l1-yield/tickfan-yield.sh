#!/bin/sh
exec /work/target-main/release/tickfan "$@" --idle yield

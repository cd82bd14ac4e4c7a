#!/bin/sh
exec <this commit's release binary> "$@" --feed-thread own

<!doctype html><title>char_lm</title><p>placeholder placeholder placeholder placeholder placeholder placeholder placeholder placeholder placeholder

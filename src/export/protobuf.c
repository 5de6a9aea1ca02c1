/* SPDX-License-Identifier: MIT */
/* Placeholder: being written (issue 4). */

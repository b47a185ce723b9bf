// Walking raw (unanalyzed) parse trees and planned expressions, across the supported server versions (15, 17, 18).
//
//  * 16 gave the tree walkers a typed callback (tree_walker_callback, through a macro); 15
//    declares them with an unprototyped bool (*)(), which C++ sees as a function of no arguments.
#pragma once

extern "C" {
#include "postgres.h"
#include "nodes/nodeFuncs.h"
}

namespace aq::compat {

using RawTreeWalker = bool (*)(Node* node, void* context);

// Calls walker on each direct child of node (as raw_expression_tree_walker does).
inline bool raw_tree_walk_children(Node* node, RawTreeWalker walker, void* context) {
#if PG_VERSION_NUM >= 160000
    return raw_expression_tree_walker(node, walker, context);
#else
    // Through void (*)(), the type GCC lets any function pointer be cast to and from.
    return raw_expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(walker)), context);
#endif
}

// Calls walker on each direct child of an analyzed or planned expression (expression_tree_walker).
inline bool expression_walk_children(Node* node, RawTreeWalker walker, void* context) {
#if PG_VERSION_NUM >= 160000
    return expression_tree_walker(node, walker, context);
#else
    return expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(walker)), context);
#endif
}

}  // namespace aq::compat
